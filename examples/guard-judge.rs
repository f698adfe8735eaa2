//! The cost `bundle guard` adds to one `tools/list` answer of 100 tools (scripts/bench.py
//! --guard): the answer's line goes through the session as the proxy hands it over (parse,
//! judge every tool against its pin in RFC 8785 canonical form, pass the line on), timed many
//! times; prints the median and the 99th percentile in microseconds.
//!
//! usage: cargo run --release --example guard-judge [ITERATIONS]

use std::time::{Duration, Instant};

use agent_bundle::guard::session::{Action, Session};
use agent_bundle::guard::{Judge, Policy};
use serde_json::{Value, json};

/// A tool as real servers describe them: a paragraph, four typed properties, annotations.
fn tool(i: usize) -> Value {
    json!({
        "name": format!("tool_{i:03}"),
        "title": format!("Tool number {i}"),
        "description": format!("Looks up record {i} in the inventory and returns its fields. Use it when the user asks about stock levels, prices or the warehouse a product is kept in; never for orders."),
        "inputSchema": {
            "type": "object",
            "properties": {
                "sku": {"type": "string", "description": "The product's stock keeping unit.", "pattern": "^[A-Z0-9-]{4,32}$"},
                "warehouse": {"type": "string", "enum": ["north", "south", "east", "west"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
                "fields": {"type": "array", "items": {"type": "string"}, "maxItems": 20}
            },
            "required": ["sku"],
            "additionalProperties": false
        },
        "outputSchema": {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]},
        "annotations": {"readOnlyHint": true, "destructiveHint": false, "openWorldHint": false}
    })
}

fn main() {
    let iterations: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let tools: Vec<Value> = (0..100).map(tool).collect();
    let judge = Judge::new("bench", &tools, Policy::default()).expect("pins");
    let mut session = Session::new(judge, Duration::from_secs(60));
    let mut times = Vec::with_capacity(iterations);
    for n in 0..iterations + 100 {
        let request = json!({"jsonrpc": "2.0", "id": n, "method": "tools/list"}).to_string();
        let answer = json!({"jsonrpc": "2.0", "id": n, "result": {"tools": tools}}).to_string();
        let now = Instant::now();
        session.from_client(request, now);
        let start = Instant::now();
        let actions = session.from_server(answer, now);
        let took = start.elapsed();
        assert!(actions.iter().any(|a| matches!(a, Action::ToClient(l) if l.len() > 10_000)), "the list passes");
        // The first rounds warm the caches and the allocator.
        if n >= 100 {
            times.push(took);
        }
    }
    times.sort();
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)].as_secs_f64() * 1e6;
    println!(
        "{{\"tools\": 100, \"iterations\": {iterations}, \"p50_us\": {:.1}, \"p99_us\": {:.1}}}",
        at(0.50),
        at(0.99)
    );
}
