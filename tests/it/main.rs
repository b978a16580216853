//! The end-to-end tests: one binary (one link of the server's dependency tree instead of one
//! per area), a module per area. Most start the real `botbox serve` on loopback against a
//! fresh SQLite folder or a fresh PostgreSQL database (`common::Server`) and talk to it over
//! HTTP, as a client would.

#[macro_use]
mod common;

mod agent_api;
mod cases;
mod cli;
mod crash;
mod egress;
mod hostile;
mod kata_cli;
mod live;
mod nlu;
mod project_api;
mod upgrade;
