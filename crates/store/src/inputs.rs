//! A run's input files besides the dataset and the predictions: what they hold, read once.

use std::path::Path;

use anyhow::{Context, Result, bail};
use harness_core::gso::HackedIds;
use harness_core::task::Task;
use sha2::{Digest, Sha256};

/// Reads `--hacked-ids FILE`.
pub fn load_hacked_ids(path: &std::path::Path) -> Result<HackedIds> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("--hacked-ids {}: cannot read", path.display()))?;
    let text = String::from_utf8(bytes.clone())
        .with_context(|| format!("--hacked-ids {}: not UTF-8 text", path.display()))?;
    Ok(HackedIds {
        source: path.display().to_string(),
        sha256: harness_core::digest::sha256_hex(&bytes),
        ids: harness_core::gso::parse_hacked_ids(&path.display().to_string(), &text)?,
    })
}

/// A hash over every file (path and bytes) and symlink (path and target) in the folders of
/// the given tasks, in order.
pub fn selection_digest(tasks: &[&Task]) -> Result<String> {
    let mut h = Sha256::new();
    for t in tasks {
        h.update(format!("task {}\n", t.id).as_bytes());
        hash_tree(&t.dir, &t.dir, &mut h)?;
    }
    Ok(hex::encode(h.finalize()))
}

fn hash_tree(root: &Path, dir: &Path, h: &mut Sha256) -> Result<()> {
    let mut entries: Vec<std::fs::DirEntry> = std::fs::read_dir(dir)
        .with_context(|| format!("{}: cannot list", dir.display()))?
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("{}: cannot list", dir.display()))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let rel = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .display()
            .to_string();
        let kind = e
            .file_type()
            .with_context(|| format!("{}: cannot stat", path.display()))?;
        if kind.is_symlink() {
            let target = std::fs::read_link(&path)
                .with_context(|| format!("{}: cannot read link", path.display()))?;
            h.update(format!("link {rel} {}\n", target.display()).as_bytes());
        } else if kind.is_dir() {
            h.update(format!("dir {rel}\n").as_bytes());
            hash_tree(root, &path, h)?;
        } else if kind.is_file() {
            h.update(format!("file {rel} {}\n", file_digest(&path)?).as_bytes());
        } else {
            bail!("{}: neither a file, a folder nor a symlink", path.display());
        }
    }
    Ok(())
}

/// The sha256 of a file's bytes, read a piece at a time: a task folder's bundle or data
/// file can be any size (the caller found it a regular file, not a link).
fn file_digest(path: &Path) -> Result<String> {
    use std::io::Read;
    let mut f =
        std::fs::File::open(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_core::partition::{Partition, select, task_cost};

    fn task(root: &Path, id: &str, runs: u32, timeout: u32) -> Task {
        let dir = root.join(id);
        std::fs::create_dir_all(dir.join("repo")).unwrap();
        std::fs::write(dir.join("repo/bench.py"), "print(1)\n").unwrap();
        std::fs::write(dir.join("human.patch"), "").unwrap();
        let toml = format!(
            "[source]\npath = \"repo\"\n[human]\npatch = \"human.patch\"\n[test]\ncommand = \"true\"\n\
             [[bench]]\nname = \"b\"\ncommand = \"python3 bench.py\"\nwarmups = 1\nruns = {runs}\ntimeout = {timeout}\n"
        );
        std::fs::write(dir.join("task.toml"), toml).unwrap();
        crate::task_folder::load_task(&dir).unwrap()
    }

    #[test]
    fn cost_from_the_task_file_and_samples() {
        let d = tempfile::tempdir().unwrap();
        let small = task(d.path(), "small", 4, 10);
        let big = task(d.path(), "big", 9, 60);
        // (1 warm-up + 4 runs) x 10 s x (2 + 3 variants) + the build constant.
        assert_eq!(task_cost(&small, 3), 5 * 10_000 * 5 + 60_000);
        assert!(task_cost(&small, 5) > task_cost(&small, 1));
        assert!(task_cost(&big, 1) > task_cost(&small, 5));
        let tasks = [&small, &big];
        let one = select(&tasks, |_| 1, Partition { index: 1, count: 2 });
        let two = select(&tasks, |_| 1, Partition { index: 2, count: 2 });
        assert_eq!(
            one.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            ["big"]
        );
        assert_eq!(
            two.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            ["small"]
        );
        let three = select(&tasks, |_| 1, Partition { index: 3, count: 3 });
        assert!(three.is_empty());

        let before = selection_digest(&tasks).unwrap();
        assert_eq!(before, selection_digest(&tasks).unwrap());
        std::fs::write(d.path().join("big/repo/bench.py"), "print(2)\n").unwrap();
        assert_ne!(before, selection_digest(&tasks).unwrap());
    }
}
