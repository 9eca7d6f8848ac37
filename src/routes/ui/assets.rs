//! `GET /static/{file}`: the stylesheet and the copy-button script, embedded in the binary so a release
//! binary needs no file beside it. No directory listing, no other file.

use actix_web::{HttpResponse, get, web};

const APP_CSS: &[u8] = include_bytes!("../../../static/app.css");
const APP_JS: &[u8] = include_bytes!("../../../static/app.js");

#[get("/static/{file}")]
pub async fn file(name: web::Path<String>) -> HttpResponse {
    match name.as_str() {
        "app.css" => HttpResponse::Ok()
            .content_type("text/css; charset=utf-8")
            .insert_header(("Cache-Control", "public, max-age=3600"))
            .body(APP_CSS),
        "app.js" => HttpResponse::Ok()
            .content_type("text/javascript; charset=utf-8")
            .insert_header(("Cache-Control", "public, max-age=3600"))
            .body(APP_JS),
        _ => HttpResponse::NotFound().finish(),
    }
}
