module fastpath/interop/afxdp-plugin

go 1.21
