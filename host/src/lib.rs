//! botbox: the host. It performs the effects that runtime-core decides on.

pub mod agent;
pub mod api;
pub mod auth;
pub mod cases;
pub mod channels;
pub mod cli;
pub mod db;
pub mod egress;
pub mod live;
pub mod nlu;
pub mod priority;
pub mod rate;
pub mod sandbox;
pub mod server;

/// The cores this process may use (2 when the OS does not say): what thread pools, CPU
/// slots and per-tenant shares are sized by.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
}
