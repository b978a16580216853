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
pub mod rate;
pub mod sandbox;
pub mod server;
