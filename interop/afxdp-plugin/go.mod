// Built only by scripts/interop-afxdp-plugin.sh, in a copy: it requires the AF_XDP device
// plugin's modules and replaces them with the source directory it is given (go mod edit), then
// go mod tidy fetches the few modules its client needs (golang.org/x/sys, logrus, uuid).
module fastpath/interop/afxdp-plugin

go 1.21
