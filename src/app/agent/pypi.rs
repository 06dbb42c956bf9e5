//! Agents installed from PyPI (`pypi` and `install` in agents.toml): the wheel is fetched on
//! the host, once, into the harness's cache (`pip install --no-deps --only-binary :all:
//! --target`), and the files the entry names are copied into the agent's image at its
//! build. Claude Code and Codex ship as single executables inside wheels
//! (`claude-agent-sdk`, `openai-codex-cli-bin`): no Node, no npm, no network in any
//! container.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// A pinned requirement and the files of it that go into the image.
#[derive(Debug, Clone, PartialEq)]
pub struct PypiInstall {
    /// `name==version`: pinned, so an image is the same agent every time.
    pub requirement: String,
    /// (path inside the installed package folder, absolute path in the image).
    pub files: Vec<(String, String)>,
}

/// Checks a `pypi` requirement and its `install` table.
pub fn parse(requirement: &str, files: Vec<(String, String)>, at: &str) -> Result<PypiInstall> {
    let pinned = requirement.split_once("==").is_some_and(|(name, version)| {
        !name.is_empty()
            && !version.is_empty()
            && (name.chars().chain(version.chars()))
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    });
    if !pinned {
        bail!("{at}.pypi: {requirement:?} is not a pinned requirement (name==version)");
    }
    if files.is_empty() {
        bail!("{at}.install: names no file of {requirement} to put in the image");
    }
    for (from, to) in &files {
        let inside = !from.is_empty()
            && !from.starts_with('/')
            && from
                .split('/')
                .all(|p| !p.is_empty() && p != "." && p != "..");
        if !inside {
            bail!("{at}.install: {from:?} is not a path inside the package");
        }
        if !to.starts_with('/') || to.split('/').any(|p| p == "..") || to.ends_with('/') {
            bail!("{at}.install: {to:?} is not an absolute file path in the image");
        }
    }
    Ok(PypiInstall {
        requirement: requirement.to_string(),
        files,
    })
}

/// The harness's cache: `HARNESS_CACHE_DIR`, else `$XDG_CACHE_HOME/harness`, else
/// `~/.cache/harness`.
pub fn cache_root() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("HARNESS_CACHE_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d).join("harness"));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .context("no HOME, XDG_CACHE_HOME or HARNESS_CACHE_DIR for the harness's cache")?;
    Ok(PathBuf::from(home).join(".cache/harness"))
}

/// The folder the requirement is installed in (fetched now when the cache lacks it).
pub fn fetch(requirement: &str, say: &dyn Fn(String)) -> Result<PathBuf> {
    let dir = cache_root()?
        .join("pypi")
        .join(requirement.replace("==", "-"));
    if dir.join(".complete").is_file() {
        return Ok(dir);
    }
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial)
        .with_context(|| format!("{}: cannot create", partial.display()))?;
    say(format!(
        "fetching {requirement} from PyPI into {} (one time)",
        dir.display()
    ));
    let out = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-compile",
            "--only-binary",
            ":all:",
            "--disable-pip-version-check",
            "--target",
        ])
        .arg(&partial)
        .arg(requirement)
        .output()
        .context("cannot run python3 -m pip (the host needs Python 3 with pip to install agents from PyPI)")?;
    if !out.status.success() {
        bail!(
            "pip could not install {requirement}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    std::fs::write(partial.join(".complete"), requirement)
        .with_context(|| format!("{}: cannot write", partial.display()))?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&partial, &dir)
        .with_context(|| format!("{}: cannot move into place", dir.display()))?;
    Ok(dir)
}

/// The image's build-context files for `install` (root/<path>, executable), from `dir`.
pub fn image_files(install: &PypiInstall, dir: &Path) -> Result<Vec<(String, Vec<u8>, u32)>> {
    install
        .files
        .iter()
        .map(|(from, to)| {
            let path = dir.join(from);
            let bytes = std::fs::read(&path).with_context(|| {
                format!(
                    "{}: not in {} (agents.toml's install names it)",
                    path.display(),
                    install.requirement
                )
            })?;
            Ok((format!("root{to}"), bytes, 0o755))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_are_pinned_and_files_stay_inside() {
        let f = |a: &str, b: &str| vec![(a.to_string(), b.to_string())];
        assert!(
            parse(
                "claude-agent-sdk==0.2.189",
                f("a/b", "/usr/local/bin/c"),
                "x"
            )
            .is_ok()
        );
        for (req, files, says) in [
            ("claude-agent-sdk", f("a", "/b"), "pinned"),
            ("claude-agent-sdk>=1", f("a", "/b"), "pinned"),
            ("x==1; rm -rf /", f("a", "/b"), "pinned"),
            ("x==1", f("../a", "/b"), "inside the package"),
            ("x==1", f("/etc/passwd", "/b"), "inside the package"),
            ("x==1", f("a", "bin/c"), "absolute"),
            ("x==1", Vec::new(), "names no file"),
        ] {
            let e = parse(req, files, "agents.toml: agent.a")
                .unwrap_err()
                .to_string();
            assert!(e.contains(says) && e.contains("agent.a"), "{e}");
        }
    }
}
