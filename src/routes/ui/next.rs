//! Where sign-in leads: the page that was asked for when the guard sent a
//! person to `/login`, carried as `next` and followed only when it is a
//! path of this site — never another origin (`//host`, `https://…`, `/\host`,
//! which browsers read as one), never a line break into a header, never the
//! sign-in, sign-out or setup pages themselves.

/// Longest `next` followed; a longer one is dropped.
const MAX_LEN: usize = 2048;

/// `next` when it is safe to redirect to after sign-in.
pub fn safe(next: &str) -> Option<&str> {
    let same_site = next.starts_with('/')
        && !next.starts_with("//")
        && !next.contains('\\')
        && next.len() <= MAX_LEN
        && !next.chars().any(char::is_control);
    let path = next.split(['?', '#']).next().unwrap_or_default();
    let loops = ["/login", "/logout", "/setup"]
        .iter()
        .any(|p| path == *p || path.starts_with(&format!("{p}/")));
    (same_site && !loops).then_some(next)
}

/// `/login`, with the page asked for (its path and query as requested) to
/// go back to when it is safe.
pub fn login_location(asked: &str) -> String {
    match safe(asked) {
        Some(next) if next != "/" => format!(
            "/login?{}",
            serde_urlencoded::to_string([("next", next)]).unwrap_or_default()
        ),
        _ => "/login".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_path_of_this_site_is_followed() {
        for ok in [
            "/cases",
            "/deliveries/0190?x=1#top",
            "/cases?reason=weak_match_critical",
        ] {
            assert_eq!(safe(ok), Some(ok), "{ok}");
        }
        for hostile in [
            "//evil.example",
            "https://evil.example/",
            "/\\evil.example",
            "\\\\evil.example",
            "evil.example",
            "/cases\r\nSet-Cookie: x=1",
            "/login",
            "/login?next=/cases",
            "/setup/abc",
            "/logout",
            "",
        ] {
            assert_eq!(safe(hostile), None, "{hostile:?}");
        }
        assert_eq!(safe(&format!("/{}", "a".repeat(MAX_LEN))), None);
    }

    #[test]
    fn the_login_location_carries_the_page_encoded() {
        assert_eq!(
            login_location("/deliveries?q=pay 1&x=2"),
            "/login?next=%2Fdeliveries%3Fq%3Dpay+1%26x%3D2"
        );
        assert_eq!(login_location("/"), "/login");
        assert_eq!(login_location("//evil.example"), "/login");
    }
}
