//! The appliance server: RESP (the Redis protocol) over TCP on the engine.

pub mod resp;
