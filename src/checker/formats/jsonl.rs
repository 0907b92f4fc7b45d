//! stampede's own `history.jsonl`: one [`Op`] as a JSON object per line.

use anyhow::Context;

use crate::history::Op;

/// Parses JSON lines; blank lines are allowed, anything else that is not an op is an error
/// naming the line.
pub fn parse(text: &str) -> anyhow::Result<Vec<Op>> {
    let mut ops = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let op: Op = serde_json::from_str(line).with_context(|| format!("line {}", n + 1))?;
        ops.push(op);
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ops_and_names_the_bad_line() {
        let good =
            "{\"index\":0,\"time\":5,\"type\":\"invoke\",\"process\":3,\"f\":\"write\",\"value\":1,\"key\":\"a\"}\n\n\
                    {\"index\":1,\"time\":9,\"type\":\"ok\",\"process\":3,\"f\":\"write\",\"value\":1,\"version\":1}\n";
        let ops = parse(good).unwrap();
        assert_eq!(ops.len(), 2);
        assert_eq!(ops[1].version, Some(1));
        let bad = format!("{good}{{\"index\":2,\"type\":\"bogus\"}}\n");
        let e = format!("{:#}", parse(&bad).unwrap_err());
        assert!(e.starts_with("line 4"), "{e}");
    }
}
