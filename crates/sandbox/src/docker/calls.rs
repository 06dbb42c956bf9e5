//! Every call to the engine goes through here: a bounded number at once, and transient
//! failures (daemon restarting, connection refused or reset, 502/503/504) retried with
//! exponential backoff. A call that may have reached the daemon is retried only when doing
//! it twice is harmless, or when the caller can tell it did not happen (see `Sandbox`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::Semaphore;

/// Engine calls in flight at once, per harness process.
pub const MAX_CALLS_IN_FLIGHT: usize = 8;
/// Tries of one call, the first included.
pub const ATTEMPTS: u32 = 6;
const FIRST_DELAY: Duration = Duration::from_millis(250);
const MAX_DELAY: Duration = Duration::from_secs(4);

/// Whether repeating a call is harmless when the first try may have reached the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    /// Reads, removals, kills, uploads of the same bytes.
    Harmless,
    /// Retried only when the request surely never reached the daemon.
    OnlyIfNotSent,
}

/// How a failed call failed, when the failure is worth another try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transient {
    /// The connection was never made: the daemon saw nothing.
    NotSent,
    /// The connection broke, or the daemon said it is unavailable: it may have acted.
    MaybeSent,
}

/// Classifies an engine error; `None` for one that another try would not change.
pub fn classify(e: &bollard::errors::Error) -> Option<Transient> {
    use bollard::errors::Error as E;
    match e {
        E::SocketNotFoundError(_) => Some(Transient::NotSent),
        E::IOError { err } => io_kind(err.kind()),
        E::HyperLegacyError { err } => {
            if err.is_connect() {
                Some(Transient::NotSent)
            } else {
                Some(Transient::MaybeSent)
            }
        }
        E::HyperResponseError { err } => {
            (err.is_incomplete_message() || err.is_closed() || err.is_canceled())
                .then_some(Transient::MaybeSent)
        }
        E::RequestTimeoutError => Some(Transient::MaybeSent),
        E::DockerResponseServerError { status_code, .. } => {
            matches!(status_code, 429 | 502 | 503 | 504).then_some(Transient::MaybeSent)
        }
        _ => None,
    }
}

fn io_kind(kind: std::io::ErrorKind) -> Option<Transient> {
    use std::io::ErrorKind as K;
    match kind {
        K::ConnectionRefused | K::NotFound => Some(Transient::NotSent),
        K::ConnectionReset
        | K::ConnectionAborted
        | K::BrokenPipe
        | K::UnexpectedEof
        | K::TimedOut
        | K::Interrupted => Some(Transient::MaybeSent),
        _ => None,
    }
}

/// Whether a failure of a call with `repeat` deserves another try.
pub fn worth_retrying(e: &bollard::errors::Error, repeat: Repeat) -> bool {
    match classify(e) {
        Some(Transient::NotSent) => true,
        Some(Transient::MaybeSent) => repeat == Repeat::Harmless,
        None => false,
    }
}

/// The wait before try `attempt + 1` (attempt counts from 1): doubling from 250 ms up to
/// 4 s, with up to a quarter more so that many waiting calls do not come back at once.
pub fn backoff(attempt: u32, jitter_seed: u64) -> Duration {
    let doubled = FIRST_DELAY.saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
    let base = doubled.min(MAX_DELAY);
    let spread = (jitter_seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) as u32; // 0..1024
    base + base.mul_f64(f64::from(spread) / 4096.0)
}

/// The limit on calls in flight, the retry count, and who hears about retries.
#[derive(Clone)]
pub struct CallGate {
    permits: Arc<Semaphore>,
    retried: Arc<AtomicU64>,
    notices: Arc<OnceLock<crate::events::Events>>,
}

impl Default for CallGate {
    fn default() -> Self {
        CallGate {
            permits: Arc::new(Semaphore::new(MAX_CALLS_IN_FLIGHT)),
            retried: Arc::new(AtomicU64::new(0)),
            notices: Arc::new(OnceLock::new()),
        }
    }
}

impl CallGate {
    /// Retries are reported to `events` (as detail lines) from now on.
    pub fn report_to(&self, events: crate::events::Events) {
        let _ = self.notices.set(events);
    }

    /// Calls retried after a transient failure so far.
    pub fn retried(&self) -> u64 {
        self.retried.load(Ordering::SeqCst)
    }

    /// Runs `f` against `api` under the limit, retrying transient failures.
    pub async fn call<T, Fut>(
        &self,
        api: &bollard::Docker,
        what: &str,
        repeat: Repeat,
        mut f: impl FnMut(bollard::Docker) -> Fut,
    ) -> Result<T, bollard::errors::Error>
    where
        Fut: std::future::Future<Output = Result<T, bollard::errors::Error>>,
    {
        let mut attempt = 1;
        loop {
            let result = {
                // A closed semaphore never happens (it is never closed); go on without.
                let _permit = self.permits.acquire().await.ok();
                f(api.clone()).await
            };
            match result {
                Err(e) if attempt < ATTEMPTS && worth_retrying(&e, repeat) => {
                    self.wait_before_retry(what, &e, attempt).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// Counts, reports and sleeps before another try of a failed call.
    pub async fn wait_before_retry(&self, what: &str, e: &bollard::errors::Error, attempt: u32) {
        let n = self.retried.fetch_add(1, Ordering::SeqCst);
        let delay = backoff(attempt, n ^ u64::from(std::process::id()));
        if let Some(events) = self.notices.get() {
            crate::events::emit(
                events,
                harness_core::events::Event::Debug(format!(
                    "docker: {what} failed ({e}); try {} of {ATTEMPTS} in {:.2} s",
                    attempt + 1,
                    delay.as_secs_f64()
                )),
            );
        }
        tokio::time::sleep(delay).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::errors::Error as E;

    fn io(kind: std::io::ErrorKind) -> E {
        E::IOError {
            err: std::io::Error::from(kind),
        }
    }

    #[test]
    fn classification() {
        use std::io::ErrorKind as K;
        assert_eq!(
            classify(&io(K::ConnectionRefused)),
            Some(Transient::NotSent)
        );
        assert_eq!(
            classify(&io(K::ConnectionReset)),
            Some(Transient::MaybeSent)
        );
        assert_eq!(classify(&io(K::PermissionDenied)), None);
        let server = |status_code| E::DockerResponseServerError {
            status_code,
            message: "x".into(),
        };
        assert_eq!(classify(&server(503)), Some(Transient::MaybeSent));
        assert_eq!(classify(&server(404)), None);
        assert_eq!(classify(&server(409)), None);
        assert_eq!(classify(&server(500)), None);
        assert!(worth_retrying(
            &io(K::ConnectionRefused),
            Repeat::OnlyIfNotSent
        ));
        assert!(!worth_retrying(
            &io(K::ConnectionReset),
            Repeat::OnlyIfNotSent
        ));
        assert!(worth_retrying(&io(K::ConnectionReset), Repeat::Harmless));
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let d: Vec<Duration> = (1..=8).map(|a| backoff(a, 0)).collect();
        assert_eq!(d[0], Duration::from_millis(250));
        assert_eq!(d[1], Duration::from_millis(500));
        assert_eq!(d[4], Duration::from_secs(4));
        assert_eq!(d[7], Duration::from_secs(4));
        for seed in 0..100 {
            let j = backoff(3, seed);
            assert!(j >= Duration::from_secs(1) && j <= Duration::from_millis(1250));
        }
    }

    #[tokio::test]
    async fn retries_transient_failures_then_gives_up() {
        // A socket file nobody listens on: every connection is refused.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("refusing.sock");
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let api = bollard::Docker::connect_with_unix(
            path.to_str().unwrap(),
            5,
            bollard::API_DEFAULT_VERSION,
        )
        .unwrap();
        let gate = CallGate::default();
        let mut tries = 0;
        let started = std::time::Instant::now();
        let r: Result<(), _> = gate
            .call(&api, "ping", Repeat::OnlyIfNotSent, |api| {
                tries += 1;
                async move { api.ping().await.map(|_| ()) }
            })
            .await;
        assert!(r.is_err());
        assert_eq!(
            tries, ATTEMPTS,
            "a refused connection is tried {ATTEMPTS} times"
        );
        assert_eq!(gate.retried(), u64::from(ATTEMPTS - 1));
        assert!(started.elapsed() >= Duration::from_millis(250 + 500 + 1000 + 2000 + 4000));

        // A permanent failure is not retried.
        let gate = CallGate::default();
        let mut tries = 0;
        let r: Result<(), _> = gate
            .call(&api, "inspect", Repeat::Harmless, |_| {
                tries += 1;
                async {
                    Err(E::DockerResponseServerError {
                        status_code: 404,
                        message: "no such container".into(),
                    })
                }
            })
            .await;
        assert!(r.is_err());
        assert_eq!(tries, 1);
    }
}
