//! Shared and anonymous memory mappings (rings, UMEM): `mmap`, `mlock`, `madvise`, `munmap`.

use std::os::fd::AsRawFd;
use std::ptr::NonNull;

use super::SysError;

/// An anonymous or file-backed shared mapping, unmapped on drop.
#[derive(Debug)]
pub struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory; synchronisation of its contents is the user's job
// (the ring module uses atomics for the shared indices).
unsafe impl Send for Mmap {}

impl Mmap {
    /// `mmap(NULL, len, PROT_READ|PROT_WRITE, MAP_SHARED|MAP_POPULATE, fd, offset)`: maps an AF_XDP ring.
    pub fn ring(fd: &impl AsRawFd, len: usize, offset: u64, label: &str) -> Result<Self, SysError> {
        // SAFETY: a fresh shared mapping; the result is checked against MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(SysError::last(format!("mmap({label}, len={len}, offset={offset:#x})")));
        }
        Ok(Self { ptr: NonNull::new(p.cast()).expect("mmap returned NULL"), len })
    }

    /// Page-aligned anonymous private memory for a UMEM, optionally on huge pages
    /// (`MAP_HUGETLB`, needs pages reserved in /proc/sys/vm/nr_hugepages).
    pub fn anonymous(len: usize, huge_pages: bool) -> Result<Self, SysError> {
        // munmap of a huge-page mapping needs a length that is a multiple of the huge page size
        // (2 MiB on x86-64): round up so drop really unmaps it.
        const HUGE_PAGE: usize = 2 << 20;
        let len = if huge_pages { len.div_ceil(HUGE_PAGE) * HUGE_PAGE } else { len };
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
        if huge_pages {
            flags |= libc::MAP_HUGETLB;
        }
        // SAFETY: a fresh anonymous mapping; the result is checked against MAP_FAILED.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
        if p == libc::MAP_FAILED {
            let what = if huge_pages {
                "MAP_ANONYMOUS|MAP_HUGETLB; are huge pages reserved in /proc/sys/vm/nr_hugepages?"
            } else {
                "MAP_ANONYMOUS"
            };
            return Err(SysError::last(format!("mmap({what}, len={len})")));
        }
        Ok(Self { ptr: NonNull::new(p.cast()).expect("mmap returned NULL"), len })
    }

    /// `mlock` the mapping (needs CAP_IPC_LOCK or enough RLIMIT_MEMLOCK).
    pub fn mlock(&self) -> Result<(), SysError> {
        // SAFETY: the range is our own live mapping.
        if unsafe { libc::mlock(self.ptr.as_ptr().cast(), self.len) } < 0 {
            return Err(SysError::last(format!("mlock(len={})", self.len)));
        }
        Ok(())
    }

    /// `madvise(MADV_DONTDUMP)`: keep packet memory out of core dumps.
    pub fn dont_dump(&self) -> Result<(), SysError> {
        // SAFETY: the range is our own live mapping.
        if unsafe { libc::madvise(self.ptr.as_ptr().cast(), self.len, libc::MADV_DONTDUMP) } < 0 {
            return Err(SysError::last(format!("madvise(len={}, MADV_DONTDUMP)", self.len)));
        }
        Ok(())
    }

    /// Start of the mapping.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: we own this mapping and nobody uses it after drop.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
