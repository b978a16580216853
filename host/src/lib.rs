//! botbox: the host. It performs the effects that runtime-core decides on.

pub mod sandbox;
