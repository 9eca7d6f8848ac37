//! `GET /`: the back-office starts at the queue of open cases.

use actix_web::{HttpResponse, get};

use super::see_other;
use crate::auth::Principal;

#[get("/")]
pub async fn show(_operator: Principal) -> HttpResponse {
    see_other("/cases")
}
