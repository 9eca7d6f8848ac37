//! The README's quick start, run as written: the `sh` blocks of its section,
//! in order, by `bash` against a server on the demo configuration, twice on
//! one database. Every answer must carry what the README's sample answer
//! shows (`"…"`: any value), and the runs must open no case: a newcomer who
//! pastes it again must not meet a collision the README does not mention.

use serde_json::Value;

use crate::support::app::spawn_demo;
use crate::support::counts::Counts;

const README: &str = include_str!("../../README.md");
const SECTION: &str = "## Quick start";
/// What the README says, and what the test server is instead.
const ADDRESS: &str = "http://127.0.0.1:8080";
const CARGO_RUN: &str = "cargo run -q --release --";
/// A sample's value that changes every run.
const ANY: &str = "…";

/// The `sh` blocks of the quick-start section, in order.
fn quick_start(readme: &str) -> Vec<String> {
    let mut lines = readme.lines().skip_while(|line| line.trim_end() != SECTION);
    assert!(
        lines.next().is_some(),
        "the README has no `{SECTION}` section"
    );
    let mut blocks = Vec::new();
    let mut block: Option<String> = None;
    for line in lines.take_while(|line| !line.starts_with("## ")) {
        match (&mut block, line.trim_end()) {
            (None, "```sh") => block = Some(String::new()),
            (Some(_), "```") => blocks.extend(block.take()),
            (Some(text), _) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(block.is_none(), "an unclosed block in the quick start");
    blocks
}

/// The sample answers: comment lines holding one JSON object.
fn samples(script: &str) -> Vec<Value> {
    script
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("# {"))
        .map(|json| {
            let json = format!("{{{json}");
            serde_json::from_str(&json)
                .unwrap_or_else(|e| panic!("a sample answer is not JSON ({e}): {json}"))
        })
        .collect()
}

/// Whether `actual` carries every field `sample` shows, with its value.
fn shows(actual: &Value, sample: &Value, at: &str) -> Result<(), String> {
    match (sample, actual) {
        (Value::String(any), Value::Null) if any == ANY => Err(format!("{at}: null")),
        (Value::String(any), _) if any == ANY => Ok(()),
        (Value::Object(fields), Value::Object(got)) => {
            fields.iter().try_for_each(|(name, want)| {
                let at = format!("{at}.{name}");
                let got = got.get(name).ok_or_else(|| format!("{at}: missing"))?;
                shows(got, want, &at)
            })
        }
        (Value::Array(items), Value::Array(got)) if items.len() == got.len() => items
            .iter()
            .zip(got)
            .enumerate()
            .try_for_each(|(i, (want, got))| shows(got, want, &format!("{at}[{i}]"))),
        _ if sample == actual => Ok(()),
        _ => Err(format!("{at}: {actual} where the README shows {sample}")),
    }
}

/// The quick start as a newcomer types it, aimed at the test server: its
/// address, and the `unicity` binary of this build on the server's database.
fn aimed(script: &str, address: &str) -> String {
    assert!(
        script.contains(ADDRESS),
        "the quick start never calls {ADDRESS}"
    );
    let binary = format!("'{}'", env!("CARGO_BIN_EXE_unicity"));
    let aimed = script.replace(ADDRESS, address).replace(CARGO_RUN, &binary);
    assert!(
        !aimed.contains("127.0.0.1:8080") && !aimed.contains("cargo "),
        "the quick start runs something this test cannot aim at its server:\n{aimed}"
    );
    aimed
}

/// Runs `script` with `bash`, strictly; returns the lines it printed.
async fn run(script: String, database_url: &str) -> Vec<String> {
    let mut command = std::process::Command::new("bash");
    command
        .args(["-euo", "pipefail", "-c", &script])
        .env("DATABASE_URL", database_url)
        .env_remove("UNICITY_CONFIG")
        .env("RUST_LOG", "warn");
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "the quick start failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn the_readme_quick_start_gives_the_answers_it_shows_run_after_run() {
    let blocks = quick_start(README);
    assert!(!blocks.is_empty(), "the quick start has no sh block");
    let script = blocks.join("\n");
    let expected = samples(&script);
    assert!(!expected.is_empty(), "the quick start shows no answer");
    let app = spawn_demo().await;
    let script = aimed(&script, &app.address);

    for run_number in 1..=2 {
        let printed = run(script.clone(), &app.database_url).await;
        assert_eq!(
            printed.len(),
            expected.len(),
            "run {run_number}: the README shows {} answers, the commands printed:\n{}",
            expected.len(),
            printed.join("\n")
        );
        for (i, (line, sample)) in printed.iter().zip(&expected).enumerate() {
            let actual: Value = serde_json::from_str(line).unwrap_or_else(|e| {
                panic!("run {run_number}, answer {i} is not JSON ({e}): {line}")
            });
            if let Err(difference) = shows(&actual, sample, "answer") {
                panic!("run {run_number}, answer {i}: {difference}\n{line}");
            }
        }
    }

    let collisions = app.cases_with("transport_id_collision").await;
    assert_eq!(
        collisions, 0,
        "running the quick start again reused a delivery id"
    );
    let cases = app.cases().await;
    assert_eq!(
        cases, 0,
        "the quick start opened a case it does not mention"
    );
}

#[test]
fn a_sample_answer_is_held_to_every_value_it_shows() {
    let sample = serde_json::json!({"decision": "process", "effect_id": ANY, "items": [{"reason": "new_key"}]});
    let answer = |decision: &str, effect: Value| serde_json::json!({"decision": decision, "effect_id": effect, "extra": 1, "items": [{"reason": "new_key", "key": "k"}]});
    assert_eq!(
        shows(&answer("process", "e1".into()), &sample, "answer"),
        Ok(())
    );
    assert!(shows(&answer("ignore", "e1".into()), &sample, "answer").is_err());
    assert!(shows(&answer("process", Value::Null), &sample, "answer").is_err());
    let no_items = serde_json::json!({"decision": "process", "effect_id": "e1", "items": []});
    assert!(shows(&no_items, &sample, "answer").is_err());
}
