//! The cluster tests' harness: the three-node Cassandra cluster (`nodes`), a run of two Oncekey
//! servers under the effect workload and the recorded workload (`run`), recorded histories
//! (`history`, `recorder`, `wire`), their linearizability checker (`linearizability`) and the
//! unavailability figures measured from them (`downtime`).

#![allow(dead_code)]

pub mod downtime;
pub mod history;
pub mod linearizability;
pub mod nodes;
pub mod recorder;
pub mod run;
pub mod wire;

#[cfg(test)]
mod checker_tests;
