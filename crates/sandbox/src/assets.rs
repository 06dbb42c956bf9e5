//! The harness's own files inside every task container: the supervisor (a static program
//! built from container/supervisor/: every run's fresh sandbox, and the pinned interpreter of the
//! harness's Python programs), the patch cascade, the timer, the guard, and the
//! sitecustomize and pytest plugin of the test phase. They are uploaded, root-owned, into
//! every container, watched by the guard, and part of every sample's result key (a change to
//! any of them measures again).

use sha2::{Digest, Sha256};

/// One file under `/` in the container.
pub struct Asset {
    /// Path without the leading `/`.
    pub path: &'static str,
    pub bytes: &'static [u8],
    pub mode: u32,
}

/// Where the supervisor is in every container.
pub const SUPERVISOR: &str = "/opt/harness/bin/harness-supervisor";

/// The warden's own folder (its manifest and state), the warden's alone.
pub const WARDEN_DIR: &str = "opt/harness/var";

/// What the image build's last step runs (guard.py lock-image, the programs it imports and
/// the schema of the result line it prints), by file name in `/opt/harness-build`; their bytes come from [`ASSETS`], the one table.
const BUILD_SCRIPT_NAMES: &[&str] = &[
    "guard.py",
    "caches.py",
    "image_lock.py",
    "processes.py",
    "broker.py",
    "treewalk.py",
    "watched.py",
    "timer_contract.py",
    "timer_result.schema.json",
];

/// The image build's programs: (file name, bytes), each from [`ASSETS`].
pub fn build_scripts() -> Vec<(&'static str, &'static [u8])> {
    BUILD_SCRIPT_NAMES
        .iter()
        .filter_map(|name| {
            ASSETS
                .iter()
                .find(|a| a.path.strip_prefix("opt/harness/") == Some(*name))
                .map(|a| (*name, a.bytes))
        })
        .collect()
}

/// The supervisor and every file under `container/programs/`, each with its own mode: the
/// table build.rs walks (no file can be added there and left out).
pub const ASSETS: &[Asset] = include!(concat!(env!("OUT_DIR"), "/assets.rs"));

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
        h.update(a.bytes);
        h.update([0]);
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The image build runs guard.py with only the build scripts beside it: each program of
    /// the folder that one of them imports must be among them (a missing one failed every
    /// image build).
    #[test]
    fn the_image_build_has_every_program_its_scripts_import() {
        let scripts = build_scripts();
        assert_eq!(
            scripts.len(),
            BUILD_SCRIPT_NAMES.len(),
            "a name not in ASSETS"
        );
        let ours: Vec<&str> = ASSETS
            .iter()
            .filter_map(|a| a.path.strip_prefix("opt/harness/")?.strip_suffix(".py"))
            .collect();
        let import =
            regex::Regex::new(r"(?m)^\s*(?:from\s+(\w+)\s+import|import\s+(\w+))").unwrap();
        for (name, bytes) in &scripts {
            let text = String::from_utf8_lossy(bytes);
            for c in import.captures_iter(&text) {
                let module = c.get(1).or(c.get(2)).unwrap().as_str();
                if ours.contains(&module) {
                    let file = format!("{module}.py");
                    assert!(
                        BUILD_SCRIPT_NAMES.contains(&file.as_str()),
                        "{name} imports {module}, which the image build does not get"
                    );
                }
            }
        }
    }

    #[test]
    fn every_file_of_the_harness_folder_is_an_asset() {
        // A script added to harness/ but not here would not reach the containers, nor
        // count in the result key.
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../container/programs");
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
        let mut listed: Vec<String> = ASSETS
            .iter()
            .map(|a| a.path.to_string())
            .filter(|p| format!("/{p}") != SUPERVISOR)
            .collect();
        listed.sort();
        assert_eq!(on_disk, listed);
        for a in ASSETS
            .iter()
            .filter(|a| format!("/{}", a.path) != SUPERVISOR)
        {
            let disk = std::fs::read(root.join(a.path.trim_start_matches("opt/harness/"))).unwrap();
            assert_eq!(disk, a.bytes, "{} is embedded as it is on disk", a.path);
        }
        // Each with its own executable bit: the programs run directly are executable, the
        // modules they import are not.
        let mode = |p: &str| ASSETS.iter().find(|a| a.path == p).map(|a| a.mode);
        assert_eq!(mode("opt/harness/apply_patch.sh"), Some(0o755));
        assert_eq!(mode("opt/harness/timed_run.py"), Some(0o755));
        assert_eq!(mode("opt/harness/guard.py"), Some(0o644));
        assert_eq!(mode("opt/harness/py/sitecustomize.py"), Some(0o644));
        // The supervisor is a static executable: it loads nothing from the image.
        let sup = ASSETS
            .iter()
            .find(|a| format!("/{}", a.path) == SUPERVISOR)
            .unwrap();
        assert_eq!(&sup.bytes[..4], b"\x7fELF");
        let b = sup.bytes;
        let u16_at = |at: usize| u16::from_le_bytes([b[at], b[at + 1]]) as usize;
        let phoff = u64::from_le_bytes(b[0x20..0x28].try_into().unwrap()) as usize;
        let (size, count) = (u16_at(0x36), u16_at(0x38));
        for i in 0..count {
            let at = phoff + i * size;
            let p_type = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
            assert_ne!(
                p_type, 3,
                "the supervisor has a PT_INTERP: it is not static"
            );
        }
        assert_eq!(digest().len(), 64);
    }
}
