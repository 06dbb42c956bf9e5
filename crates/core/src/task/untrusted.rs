//! What a dataset's author writes is untrusted: revisions are revisions (never options), URLs
//! are plain network URLs, variables are passed only when the user allows them (the files a
//! task names stay inside its folder: `harness_store::task_folder`).

/// Set once by the command line (`--pass-env NAME`, `HARNESS_PASS_ENV`): the variables a
/// task's `[env] pass` and an agent's `env` (agents.toml) may take from the harness's
/// environment. A dataset or an agents file names what it asks for; only the user decides
/// what leaves this process (a task or agent with network could send a key anywhere).
static PASS_ALLOWED: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

pub fn allow_pass_env(names: Vec<String>) {
    let _ = PASS_ALLOWED.set(names);
}

/// The names of `asked` the user allowed, and those it did not.
pub fn allowed_env(asked: &[String]) -> (Vec<String>, Vec<String>) {
    split_allowed(asked, PASS_ALLOWED.get().map(Vec::as_slice).unwrap_or(&[]))
}

fn split_allowed(asked: &[String], allowed: &[String]) -> (Vec<String>, Vec<String>) {
    asked
        .iter()
        .cloned()
        .partition(|n| allowed.iter().any(|a| a == n))
}

/// A revision a dataset names (a commit, tag or branch): no option, no whitespace or control
/// character, no range.
pub fn check_revision(rev: &str) -> std::result::Result<(), String> {
    let ok = rev.len() <= 256
        && !rev.starts_with('-')
        && !rev.contains("..")
        && rev
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/-^~@{}".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{rev:?} is not a revision (letters, digits and ._/-^~@{{}}, not starting with '-')"
        ))
    }
}

/// A URL git may clone for a dataset: https, http, git or ssh; never an option or a helper
/// (`ext::`), no whitespace or control character.
pub fn check_url(url: &str) -> std::result::Result<(), String> {
    let scheme_ok = ["https://", "http://", "git://", "ssh://"]
        .iter()
        .any(|s| url.starts_with(s) && url.len() > s.len());
    if scheme_ok && !url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        Ok(())
    } else {
        Err(format!(
            "{url:?}: only https://, http://, git:// and ssh:// URLs, without spaces or control characters"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_and_urls_cannot_be_options() {
        for bad in ["--output=/tmp/x", "-x", "a b", "a..b", "a\nb", "x;y"] {
            assert!(check_revision(bad).is_err(), "{bad:?}");
        }
        for good in [
            "v1.2",
            "0123abcd",
            "refs/tags/v1",
            "HEAD~1",
            "main^{commit}",
        ] {
            assert!(check_revision(good).is_ok(), "{good:?}");
        }
        for bad in [
            "--upload-pack=touch /tmp/x",
            "ext::sh -c touch% /tmp/x",
            "file:///etc",
            "/abs/repo",
            "https://",
            "https://h/x y",
        ] {
            assert!(check_url(bad).is_err(), "{bad:?}");
        }
        assert!(check_url("https://example.org/r.git").is_ok());
    }

    #[test]
    fn only_the_variables_the_user_allows_are_passed() {
        let asked = vec!["HF_TOKEN".to_string(), "AWS_SECRET_ACCESS_KEY".to_string()];
        let (pass, refused) = split_allowed(&asked, &["HF_TOKEN".to_string()]);
        assert_eq!(
            (pass, refused),
            (
                vec!["HF_TOKEN".to_string()],
                vec!["AWS_SECRET_ACCESS_KEY".to_string()]
            )
        );
        assert!(
            split_allowed(&asked, &[]).0.is_empty(),
            "nothing unless allowed"
        );
    }
}
