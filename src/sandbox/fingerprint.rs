//! The machine fingerprint of a run, with the Docker engine's own version.

use crate::core::fingerprint::Fingerprint;
use crate::sandbox::docker::Engine;

/// This host's fingerprint (see `core::fingerprint`) and the engine's version.
pub async fn collect(engine: &Engine) -> Fingerprint {
    Fingerprint::of_host(engine.server_version().await)
}
