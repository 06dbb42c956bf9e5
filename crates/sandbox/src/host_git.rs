//! Git on the host, over repositories a dataset's author wrote.
//!
//! A repository's own `.git/config` and `.git/info/attributes` can name commands (smudge and
//! textconv filters, an fsmonitor, hooks) that git runs while it reads the repository. So the
//! harness never runs git inside a dataset's repository: it copies the repository's objects
//! and references (plain files, links not followed) into a fresh repository of its own, with
//! no configuration but its object format, and runs git there with every configuration file
//! off (system, global, attributes), hooks off, no external protocol, and `--end-of-options`
//! before what the dataset names. A bundle or URL is cloned bare (no configuration comes
//! with a clone).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

/// git with nothing of the user's, the system's or a repository's configuration that could
/// run a command.
pub fn command(repo: Option<&Path>) -> Command {
    let mut c = Command::new("git");
    if let Some(repo) = repo {
        c.arg("-C").arg(repo);
    }
    c.args([
        "-c",
        "core.attributesFile=/dev/null",
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "core.fsmonitor=false",
        "-c",
        "core.autocrlf=false",
        "-c",
        "protocol.ext.allow=never",
    ])
    .env("GIT_CONFIG_NOSYSTEM", "1")
    .env("GIT_CONFIG_GLOBAL", "/dev/null")
    .env("GIT_ATTR_NOSYSTEM", "1")
    .env("GIT_NO_REPLACE_OBJECTS", "1")
    .env("GIT_TERMINAL_PROMPT", "0")
    .env_remove("GIT_DIR")
    .env_remove("GIT_WORK_TREE")
    .env_remove("GIT_CONFIG_PARAMETERS")
    .env_remove("GIT_EXTERNAL_DIFF");
    c
}

/// Runs `command(repo)` with `args`; its stdout, or an error with git's message.
pub fn run(repo: &Path, args: &[&str]) -> Result<Vec<u8>> {
    let out = command(Some(repo))
        .args(args)
        .output()
        .context("cannot run git on the host (is it installed?)")?;
    if !out.status.success() {
        bail!(
            "git {} in {}: {}",
            args.join(" "),
            repo.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

/// The repository folder of a dataset (a work tree with a `.git` folder, or a bare one)
/// copied into `cache_dir`, once per content of its references and objects.
pub fn import_folder(path: &Path, cache_dir: &Path) -> Result<PathBuf> {
    let git_dir = git_dir_of(path)?;
    let files = repository_files(&git_dir)?;
    let mut key = Sha256::new();
    key.update(path.as_os_str().as_encoded_bytes());
    for (rel, meta) in &files {
        use std::os::unix::fs::MetadataExt;
        // References by content (small); objects are named by theirs.
        if !rel.starts_with("objects/") {
            key.update(std::fs::read(git_dir.join(rel)).unwrap_or_default());
        }
        key.update(
            format!(
                "\0{rel}\0{}\0{}.{}",
                meta.len(),
                meta.mtime(),
                meta.mtime_nsec()
            )
            .as_bytes(),
        );
    }
    let key = hex::encode(key.finalize());
    cached(cache_dir, &format!("local-{}", &key[..16]), |copy| {
        copy_repository(&git_dir, &files, copy)
    })
}

/// `cache_dir/sources/name`, made by `make` in a temporary folder beside it and moved into
/// place whole, unless it is there already.
fn cached(cache_dir: &Path, name: &str, make: impl FnOnce(&Path) -> Result<()>) -> Result<PathBuf> {
    let sources = cache_dir.join("sources");
    let dest = sources.join(name);
    if dest.join("HEAD").is_file() {
        return Ok(dest);
    }
    std::fs::create_dir_all(&sources)
        .with_context(|| format!("{}: cannot create", sources.display()))?;
    let tmp = tempfile::Builder::new()
        .prefix(".fetch")
        .tempdir_in(&sources)
        .context("cannot make a temporary folder for a repository")?;
    let made = tmp.path().join("repo");
    make(&made)?;
    std::fs::rename(&made, &dest)
        .with_context(|| format!("{}: cannot move into place", dest.display()))?;
    Ok(dest)
}

/// A fresh bare repository at `copy` holding `files` of `git_dir`.
fn copy_repository(
    git_dir: &Path,
    files: &[(String, std::fs::Metadata)],
    copy: &Path,
) -> Result<()> {
    let format = object_format(git_dir);
    let init = command(None)
        .args(["init", "-q", "--bare", "--template="])
        .arg(format!("--object-format={format}"))
        .arg(copy)
        .output()
        .context("cannot run git on the host (is it installed?)")?;
    if !init.status.success() {
        bail!("git init: {}", String::from_utf8_lossy(&init.stderr).trim());
    }
    for (rel, _) in files {
        let to = copy.join(rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("{}: cannot create", parent.display()))?;
        }
        std::fs::copy(git_dir.join(rel), &to)
            .with_context(|| format!("{}: cannot copy", git_dir.join(rel).display()))?;
    }
    Ok(())
}

fn git_dir_of(path: &Path) -> Result<PathBuf> {
    let dot_git = path.join(".git");
    let meta = std::fs::symlink_metadata(&dot_git);
    match meta {
        Ok(m) if m.is_dir() => Ok(dot_git),
        Ok(_) => bail!(
            "{}: a .git that is not a folder (a link to a repository elsewhere) is not read",
            path.display()
        ),
        Err(_) if path.join("HEAD").is_file() && path.join("objects").is_dir() => {
            Ok(path.to_path_buf())
        }
        Err(_) => bail!("{}: not a git repository", path.display()),
    }
}

/// The object format a repository's configuration declares (read as text, never by git).
fn object_format(git_dir: &Path) -> &'static str {
    let config = std::fs::read_to_string(git_dir.join("config")).unwrap_or_default();
    let sha256 = config.lines().any(|l| {
        let l: String = l.chars().filter(|c| !c.is_whitespace()).collect();
        l.eq_ignore_ascii_case("objectformat=sha256")
    });
    if sha256 { "sha256" } else { "sha1" }
}

/// What a repository's content is: HEAD, packed-refs, refs/ and objects/ (regular files
/// only: links and `objects/info/alternates`, which points at other repositories, are not
/// taken), relative to the git folder.
fn repository_files(git_dir: &Path) -> Result<Vec<(String, std::fs::Metadata)>> {
    let mut out = Vec::new();
    for name in ["HEAD", "packed-refs"] {
        if let Ok(m) = std::fs::symlink_metadata(git_dir.join(name))
            && m.is_file()
        {
            out.push((name.to_string(), m));
        }
    }
    for top in ["refs", "objects"] {
        match std::fs::symlink_metadata(git_dir.join(top)) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => bail!(
                "{}: {top} is not a folder (a link to another repository is not followed)",
                git_dir.display()
            ),
            Err(_) => continue,
        }
        let mut stack = vec![top.to_string()];
        while let Some(rel) = stack.pop() {
            let dir = git_dir.join(&rel);
            let Ok(listing) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in listing {
                let entry = entry.with_context(|| format!("{}: cannot list", dir.display()))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                let child = format!("{rel}/{name}");
                let meta = std::fs::symlink_metadata(entry.path())
                    .with_context(|| format!("{}: cannot stat", entry.path().display()))?;
                if meta.is_dir() {
                    stack.push(child);
                } else if meta.is_file() && child != "objects/info/alternates" {
                    out.push((child, meta));
                }
            }
        }
    }
    if !out.iter().any(|(rel, _)| rel == "HEAD") {
        bail!("{}: not a git repository (no HEAD)", git_dir.display());
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// A bundle file or URL, cloned bare into `cache_dir` once.
pub fn clone(source: &str, cache_dir: &Path) -> Result<PathBuf> {
    let key = hex::encode(Sha256::digest(source.as_bytes()));
    cached(cache_dir, &key[..16], |repo| {
        let out = command(None)
            .args([
                "clone",
                "--quiet",
                "--bare",
                "--no-local",
                "--template=",
                "--",
            ])
            .arg(source)
            .arg(repo)
            .output()
            .context("cannot run git on the host (is it installed?)")?;
        if !out.status.success() {
            bail!(
                "git clone {source}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    })
}
