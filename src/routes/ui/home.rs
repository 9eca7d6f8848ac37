//! `GET /`: the back-office starts at the queue of open cases.

use actix_web::{HttpResponse, get};

use super::see_other;

#[get("/")]
pub async fn show() -> HttpResponse {
    see_other("/cases")
}
