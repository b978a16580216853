//! The botbox server, wired: [`server::build`] builds storage's services, the sandbox and
//! the API state and starts their workers; [`server::serve`] adds the listener. The `botbox`
//! binary (`main.rs`) is its command line. The end-to-end tests use [`server::build`] to
//! test the API in-process, without a socket. [`backup`] is `botbox backup` and `restore`.
//!
//! May depend on: every crate it wires (`runtime-core`, `botbox-lanes`, `botbox-botfiles`,
//! `botbox-store`, `botbox-egress`, `botbox-service`, `botbox-api`, `botbox-cli`); must never
//! hold logic of its own beyond configuration, wiring and the data folder's archive.

pub mod backup;
pub mod server;
