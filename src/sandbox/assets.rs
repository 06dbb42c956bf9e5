//! The harness's own files inside every task container: the patch cascade, the timer, the
//! guard, and the sitecustomize and pytest plugin of the test phase. They are uploaded,
//! root-owned, into every container, watched by the guard, and part of every sample's result
//! key (a change to any of them measures again).

use sha2::{Digest, Sha256};

/// One file under `/` in the container.
pub struct Asset {
    /// Path without the leading `/`.
    pub path: &'static str,
    pub text: &'static str,
    pub mode: u32,
}

pub const GUARD_SCRIPT: &str = include_str!("../../harness/guard.py");

pub const ASSETS: &[Asset] = &[
    Asset {
        path: "opt/harness/apply_patch.sh",
        text: include_str!("../../harness/apply_patch.sh"),
        mode: 0o755,
    },
    Asset {
        path: "opt/harness/timed_run.py",
        text: include_str!("../../harness/timed_run.py"),
        mode: 0o755,
    },
    Asset {
        path: "opt/harness/simulate.py",
        text: include_str!("../../harness/simulate.py"),
        mode: 0o644,
    },
    Asset {
        path: "opt/harness/fresh.py",
        text: include_str!("../../harness/fresh.py"),
        mode: 0o644,
    },
    Asset {
        path: "opt/harness/witness.py",
        text: include_str!("../../harness/witness.py"),
        mode: 0o644,
    },
    Asset {
        path: "opt/harness/repeat.py",
        text: include_str!("../../harness/repeat.py"),
        mode: 0o644,
    },
    Asset {
        path: "opt/harness/guard.py",
        text: GUARD_SCRIPT,
        mode: 0o644,
    },
    Asset {
        path: "opt/harness/py/sitecustomize.py",
        text: include_str!("../../harness/py/sitecustomize.py"),
        mode: 0o644,
    },
    Asset {
        path: "opt/harness/py/harness_pytest.py",
        text: include_str!("../../harness/py/harness_pytest.py"),
        mode: 0o644,
    },
];

/// Absolute paths of the assets in the container.
pub fn absolute_paths() -> Vec<String> {
    ASSETS.iter().map(|a| format!("/{}", a.path)).collect()
}

/// A digest of every asset, path, mode and bytes: what the harness runs inside the
/// container, whatever commit or working tree the binary was built from.
pub fn digest() -> String {
    let mut h = Sha256::new();
    for a in ASSETS {
        h.update(a.path.as_bytes());
        h.update([0]);
        h.update(a.mode.to_le_bytes());
        h.update(a.text.as_bytes());
        h.update([0]);
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_the_harness_folder_is_an_asset() {
        // A script added to harness/ but not here would not reach the containers, nor
        // count in the result key.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("harness");
        let mut on_disk = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    if p.file_name().is_some_and(|n| n != "__pycache__") {
                        stack.push(p);
                    }
                } else if p.extension().is_none_or(|x| x != "pyc") {
                    on_disk.push(format!(
                        "opt/harness/{}",
                        p.strip_prefix(&root).unwrap().display()
                    ));
                }
            }
        }
        on_disk.sort();
        let mut listed: Vec<String> = ASSETS.iter().map(|a| a.path.to_string()).collect();
        listed.sort();
        assert_eq!(on_disk, listed);
        for a in ASSETS {
            let disk =
                std::fs::read_to_string(root.join(a.path.trim_start_matches("opt/harness/")))
                    .unwrap();
            assert_eq!(disk, a.text, "{} is embedded as it is on disk", a.path);
        }
        assert_eq!(digest().len(), 64);
    }
}
