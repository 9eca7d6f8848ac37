//! Given/when/then tests of the decision matrix: one test per row, one per precedence
//! rule, and an exhaustive sweep of every input combination against global invariants.

mod codes;
mod edges;
mod invariants;
mod plain;
mod precedence;
mod rows;
mod space;
mod support;
mod transport;
