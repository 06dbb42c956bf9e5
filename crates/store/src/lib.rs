//! `harness-store`, what a run reads from and writes to disk: the run folder (every sample's
//! files, written atomically and never through a link, and what is read back from them),
//! the dataset's task folders, the prediction files, and the other input files of a run. No
//! Docker, no async runtime.

pub mod confined;
pub mod dataset;
pub mod inputs;
pub mod predictions;
pub mod run_folder;
pub mod task_folder;
