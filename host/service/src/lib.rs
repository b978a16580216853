//! The service layer: what botbox does, between the HTTP APIs above and storage and the
//! sandbox below. Live conversations (a channel's message through the sandbox to the outbox),
//! agent runs, Cases and tasks, accounts and permissions, rate limits, NL Studio's model
//! service, and [`effects::LiveEffects`], the real world the sandbox's host calls reach.
//!
//! May depend on: `runtime-core` and the capability crates (`botbox-store`,
//! `botbox-sandbox`, `botbox-egress`, `botbox-channels`, `botbox-nlu`, `botbox-lanes`); must
//! never depend on the HTTP layer (`botbox-api`) or know about axum: handlers call one plain
//! function here per use case, and the API writes the errors these return (a `/v1`
//! [`agent::Problem`] carries a status and headers as the `http` crate's types, no body).

pub mod agent;
pub mod audit;
pub mod auth;
pub mod cases;
pub mod cms;
pub mod cpu;
pub mod drain;
pub mod effects;
pub mod error;
pub mod learning;
pub mod live;
pub mod nlu;
pub mod projects;
pub mod quota;
pub mod rate;
pub mod revisions;
