//! Every file the command writes (`capture -w` and its rotation files, `demo --output`,
//! `compare --svg`, `bench ddos --svg`, the rule names `filter load --detach` keeps in
//! /run/fastpath) is created here: new files only (`O_CREAT|O_EXCL|O_NOFOLLOW`), mode 0600
//! (captured traffic and reports are for their owner; widen it with chmod). An existing path
//! is refused unless `--overwrite` is given, and then only a regular file is replaced (unlinked,
//! then created anew): never a symbolic link (not even one to a regular file: O_EXCL never
//! follows one, and the unlink removes the link, not its target), a directory, a FIFO or a
//! device.

use std::fs::File;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use anyhow::anyhow;

/// Refuses `path` as an output file, before any work is done: it exists and `overwrite` is not
/// set, or it is something other than a regular file. `flag` names the option in the message.
pub fn check(path: &Path, overwrite: bool, flag: &str) -> anyhow::Result<()> {
    let p = path.display();
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(anyhow!("{flag} {p}: {e}")),
        Ok(m) => {
            let t = m.file_type();
            if t.is_symlink() {
                Err(anyhow!("{flag} {p}: is a symbolic link; fastpath does not write through one (remove it or name another file)"))
            } else if !t.is_file() {
                let kind = if t.is_dir() {
                    "a directory"
                } else if t.is_fifo() {
                    "a FIFO"
                } else if t.is_block_device() || t.is_char_device() {
                    "a device"
                } else {
                    "not a regular file"
                };
                let pipe = if flag == "-w" { " (to feed a pipe or a reader, use -w - and redirect)" } else { "" };
                Err(anyhow!(
                    "{flag} {p}: is {kind}; only a new file or, with --overwrite, a regular file is written{pipe}"
                ))
            } else if !overwrite {
                Err(anyhow!("{flag} {p}: exists; --overwrite replaces it"))
            } else {
                Ok(())
            }
        }
    }
}

/// Creates `path` for writing, mode 0600, as the module docs say (`overwrite`: replace an
/// existing regular file). Errors name `flag` and the path.
pub fn create(path: &Path, overwrite: bool, flag: &str) -> anyhow::Result<File> {
    check(path, overwrite, flag)?;
    let open = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
    };
    match open() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && overwrite => {
            // A regular file (checked above; whatever is there now is only unlinked, never
            // opened): replaced by a new one.
            check(path, overwrite, flag)?;
            std::fs::remove_file(path).map_err(|e| anyhow!("{flag} {}: cannot remove it ({e})", path.display()))?;
            open().map_err(|e| anyhow!("{flag} {}: {e}", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            // Appeared since the check: report what it is.
            check(path, overwrite, flag)?;
            Err(anyhow!("{flag} {}: exists; --overwrite replaces it", path.display()))
        }
        r => r.map_err(|e| anyhow!("{flag} {}: {e}", path.display())),
    }
}

/// [`create`], then writes `data`.
pub fn write(path: &Path, overwrite: bool, flag: &str, data: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut f = create(path, overwrite, flag)?;
    f.write_all(data).and_then(|_| f.sync_all()).map_err(|e| anyhow!("{flag} {}: writing: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn new_files_only_0600_and_never_through_a_symlink() {
        let d = std::env::temp_dir().join(format!("fastpath-outfile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("a");
        write(&f, false, "-w", b"one").unwrap();
        assert_eq!(std::fs::metadata(&f).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(write(&f, false, "-w", b"two").unwrap_err().to_string().contains("--overwrite"));
        write(&f, true, "-w", b"two").unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"two");
        let victim = d.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let link = d.join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        for ow in [false, true] {
            assert!(write(&link, ow, "-w", b"x").unwrap_err().to_string().contains("symbolic link"));
        }
        let dangling = d.join("dangling");
        std::os::unix::fs::symlink(d.join("nowhere"), &dangling).unwrap();
        assert!(write(&dangling, true, "-w", b"x").is_err());
        assert!(!d.join("nowhere").exists());
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(write(&d, true, "-w", b"x").unwrap_err().to_string().contains("directory"));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
