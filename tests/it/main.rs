//! The end-to-end tests: one binary (one link of the server's dependency tree instead of one
//! per area), a module per area, with the fixtures in `common`. API logic runs in-process
//! against the router (`common::InProcess`); what needs a real connection or process
//! (webhooks, streams, crashes, the CLI) starts the real `botbox serve` on loopback
//! (`common::Server`). Both use a fresh SQLite folder or a fresh PostgreSQL database.

#[macro_use]
mod common;

mod access;
mod agent_api;
mod analytics;
mod audit;
mod canary;
mod cases;
mod cli;
mod cms;
mod console;
mod crash;
mod docs;
mod egress;
mod failover;
mod hostile;
mod kata_cli;
mod learning;
mod live;
mod nlu;
mod operations;
mod project_api;
mod proxy;
mod retention;
mod rolling;
mod tenants;
mod tidy;
mod upgrade;
