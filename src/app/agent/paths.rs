//! The files an agents.toml names are data from whoever wrote it: each must resolve (links
//! followed) to a regular file inside the folder that holds the agents.toml, or the file is
//! refused with the key that named it. Otherwise `script = "../../.ssh/id_ed25519"` (or an
//! absolute path, or a link beside the file) would copy any file of this machine into the
//! agent's container.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

/// `given`, as key `key` of agent `agent` in `file` names it, resolved inside the folder of
/// `file`: the real path (no link left in it), or an error naming the file, the agent and
/// the key.
pub(super) fn inside(file: &Path, agent: &str, key: &str, given: &str) -> Result<PathBuf> {
    let at = format!("{}: agent.{agent}.{key}", file.display());
    if given.is_empty() {
        bail!("{at}: is empty");
    }
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let refused = "an agents file may only name files in its own folder; copy the file there";
    if Path::new(given).is_absolute() {
        bail!(
            "{at}: {given:?} is an absolute path (refused: {refused}, and name it relative to {})",
            dir.display()
        );
    }
    let Ok(real_dir) = dir.canonicalize() else {
        bail!("{at}: the folder {} cannot be resolved", dir.display());
    };
    let real = match dir.join(given).canonicalize() {
        Ok(r) => r,
        Err(e) => bail!(
            "{at}: {given:?} cannot be resolved to a file in {}: {e}",
            dir.display()
        ),
    };
    if !real.starts_with(&real_dir) {
        bail!(
            "{at}: {given:?} resolves to {}, outside {} (refused: {refused})",
            real.display(),
            real_dir.display()
        );
    }
    match std::fs::metadata(&real) {
        Ok(m) if m.is_file() => Ok(real),
        Ok(_) => bail!("{at}: {given:?} is not a regular file"),
        Err(e) => bail!("{at}: {given:?}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_inside_the_agents_folder() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("cfg");
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        std::fs::write(dir.join("scripts/run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::write(root.path().join("secret"), "key").unwrap();
        std::os::unix::fs::symlink("../secret", dir.join("out-link")).unwrap();
        std::os::unix::fs::symlink("scripts/run.sh", dir.join("in-link")).unwrap();
        let file = dir.join("agents.toml");
        let real = dir.canonicalize().unwrap();
        for good in ["scripts/run.sh", "scripts/../scripts/run.sh", "in-link"] {
            assert_eq!(
                inside(&file, "a", "script", good).unwrap(),
                real.join("scripts/run.sh"),
                "{good}"
            );
        }
        let secret = root.path().join("secret");
        for (bad, why) in [
            ("../secret", "outside"),
            ("out-link", "outside"),
            ("scripts/../../secret", "outside"),
            (secret.to_str().unwrap(), "absolute path"),
            ("/etc/hostname", "absolute path"),
            ("scripts", "not a regular file"),
            ("missing.sh", "cannot be resolved"),
            ("", "is empty"),
        ] {
            let e = inside(&file, "a", "script", bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(
                e.starts_with(&format!("{}: agent.a.script: ", file.display())),
                "names the file, the agent and the key: {e}"
            );
        }
    }
}
