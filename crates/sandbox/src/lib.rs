//! `harness-sandbox`: the Docker engine (bollard lives only in `docker`), the harness's own files
//! inside every container and the protections they enforce, task images, and the
//! evaluation of one task's variants in their containers.

pub mod assets;
pub mod cpu_slots;
pub mod disk_gate;
pub mod docker;
pub mod eval;
pub mod events;
pub mod fingerprint;
pub mod gpu;
pub mod host_check;
pub mod host_git;
pub mod protect;
pub mod source;
pub mod tree;
