# The image of a task whose source is a prebuilt image (`source.image`, e.g. GSO's instance
# images): used as it is. Its /testbed is already a git repository at base with its
# environment installed, so nothing of the tree is copied in: the build context holds only
# the guard, its config and the task's `[image] files`. What the image left untracked (a
# virtualenv, build outputs) is made ignored, so resetting the tree between patch attempts
# keeps it; changes it left in tracked files are committed, so base is the tree exactly as
# the image has it, tagged harness-base. The guard then locks the tree as for any task (the
# code under test runs as the sandbox user and owns what it may write). No mtime is reset:
# every variant runs on the same image, and touching the tree would copy all of it into a
# new layer.
FROM {{BASE_IMAGE}}
COPY root/ /
{{SETUP}}
RUN cd /testbed \
    && { command -v git >/dev/null && command -v python3 >/dev/null \
      || { echo "harness: source.image: the image needs git and python3" >&2; exit 1; }; } \
    && { git -c safe.directory='*' rev-parse -q --verify HEAD >/dev/null \
      || { echo "harness: source.image: /testbed in the image is not a git repository with a commit" >&2; exit 1; }; } \
    && git -c safe.directory='*' ls-files --others --exclude-standard --directory \
       | sed -e 's/[][*?!#\\]/\\&/g' -e 's|^|/|' >> .git/info/exclude \
    && git -c safe.directory='*' -c user.name=harness -c user.email=harness@localhost \
       commit -q -a --allow-empty --no-verify -m harness-base \
    && git -c safe.directory='*' tag -f harness-base >/dev/null \
    && python3 -I -S /opt/harness-build/guard.py lock-image /opt/harness-build/config.json
LABEL {{LABELS}}
