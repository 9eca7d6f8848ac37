//! JSON routes under `/api`: each needs a bearer token or a session whose
//! role allows it (see `routes::TABLE`).

pub mod cases;
pub mod deliveries;
