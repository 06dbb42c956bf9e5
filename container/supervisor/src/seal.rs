//! The supervisor's own path made root's before anything else runs in the container: the
//! harness execs root's programs by path (`/opt/harness/bin/harness-supervisor`), so no
//! folder on that path may be a link or writable by anyone but root, whatever the image made.

use crate::sys::Result;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

/// Every folder from `/` down to the supervisor, and the supervisor itself.
pub const PATH: [&str; 5] = [
    "/",
    "/opt",
    "/opt/harness",
    "/opt/harness/bin",
    "/opt/harness/bin/harness-supervisor",
];

/// Makes each of [`PATH`] root's and writable by root alone; a link there is refused (the
/// container then stops: the run says so).
pub fn own_path() -> Result<()> {
    for path in PATH {
        let meta = std::fs::symlink_metadata(path).map_err(|e| format!("{path}: {e}"))?;
        if meta.file_type().is_symlink() {
            return Err(format!(
                "{path} is a link: the image may not move the harness's path"
            ));
        }
        if meta.uid() != 0 || meta.gid() != 0 {
            std::os::unix::fs::lchown(path, Some(0), Some(0))
                .map_err(|e| format!("cannot make {path} root's: {e}"))?;
        }
        let mode = meta.permissions().mode() & 0o7777;
        let sealed = mode & !0o7022;
        if sealed != mode {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(sealed))
                .map_err(|e| format!("cannot seal {path}: {e}"))?;
        }
    }
    Ok(())
}
