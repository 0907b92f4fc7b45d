//! Jepsen EDN histories: one list or vector of op maps (as Clojure's `pr` writes a history),
//! or one op map per line (Jepsen's `history.edn`).
//!
//! A small hand-written EDN reader covers what Jepsen writes: `;` comments, `#_` discards,
//! commas as whitespace, `nil`, booleans, integers, floats, strings, characters, keywords,
//! symbols, lists, vectors, sets, maps and tagged forms such as `#jepsen.history.Op{...}`
//! (read as the map they tag). Op maps become [`Op`]s: `:type`, `:process`, `:f` and `:value`
//! are read; `:time` (ns), `:index`, `:error`, `:node`, `:zxid` and `:version` are kept; other
//! keys are ignored. As in Jepsen (`jepsen.history/client-op?`), a process is a client when it
//! is an integer; any other (`:nemesis`, another keyword, a string) is the fault injector's:
//! loaded and counted, never checked against a model.
//!
//! Independent-key histories (`jepsen.independent`) carry `[key value]` tuples as values. A
//! history is read as one when every client invocation and `ok`/`fail` completion has a
//! 2-vector value whose first element is a scalar (integer, string or keyword) and no `cas`
//! has a non-vector argument in the second position (which tells `[k [old new]]` from a plain
//! `[old new]`). Then the key goes to [`Op::key`] and the second element to [`Op::value`]; a
//! completion without a tuple (an `info` with `:timed-out`) takes the key of its invocation.
//!
//! Values map to JSON: `nil` → null, keywords and symbols → strings without the colon,
//! vectors, lists and sets → arrays, maps → objects (keys printed as strings). Ops without
//! `:index` are numbered by position; ops without `:time` get their position as time when no
//! op has one, else the time of the op before them, so times stay monotone.

use std::collections::HashMap;
use std::fmt;

use anyhow::{anyhow, bail, Result};
use serde_json::Value;

use crate::history::{Op, OpType, Process};

/// Deepest nesting of collections the reader accepts before it reports an error.
const MAX_DEPTH: usize = 256;

/// An EDN value as Jepsen writes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Edn {
    /// `nil`.
    Nil,
    /// `true` or `false`.
    Bool(bool),
    /// An integer that fits in 64 bits.
    Int(i64),
    /// A finite floating-point number (also decimals `1.5M` and ratios `1/2`).
    Float(f64),
    /// A string.
    Str(String),
    /// A character literal such as `\a`.
    Char(char),
    /// A keyword, without its leading colon.
    Keyword(String),
    /// A symbol.
    Symbol(String),
    /// `( ... )`.
    List(Vec<Edn>),
    /// `[ ... ]`.
    Vector(Vec<Edn>),
    /// `#{ ... }`, in the order written.
    Set(Vec<Edn>),
    /// `{ ... }`, as key/value pairs in the order written.
    Map(Vec<(Edn, Edn)>),
    /// `#tag form`, e.g. `#inst "..."` or a record literal.
    Tagged(String, Box<Edn>),
}

impl Edn {
    /// Converts to JSON: nil → null, keywords → strings, collections → arrays or objects.
    pub fn to_json(&self) -> Value {
        match self {
            Edn::Nil => Value::Null,
            Edn::Bool(b) => Value::Bool(*b),
            Edn::Int(i) => Value::from(*i),
            Edn::Float(f) => Value::from(*f),
            Edn::Str(s) | Edn::Keyword(s) | Edn::Symbol(s) => Value::String(s.clone()),
            Edn::Char(c) => Value::String(c.to_string()),
            Edn::List(items) | Edn::Vector(items) | Edn::Set(items) => {
                Value::Array(items.iter().map(Edn::to_json).collect())
            }
            Edn::Map(pairs) => Value::Object(
                pairs
                    .iter()
                    .map(|(k, v)| (k.as_name(), v.to_json()))
                    .collect(),
            ),
            Edn::Tagged(_, inner) => inner.to_json(),
        }
    }

    /// A name for this value: strings and keywords as themselves, anything else printed.
    pub fn as_name(&self) -> String {
        match self {
            Edn::Str(s) | Edn::Keyword(s) | Edn::Symbol(s) => s.clone(),
            other => other.to_string(),
        }
    }

    fn is_scalar_key(&self) -> bool {
        matches!(self, Edn::Int(_) | Edn::Str(_) | Edn::Keyword(_))
    }

    fn kind(&self) -> &'static str {
        match self {
            Edn::Nil => "nil",
            Edn::Bool(_) => "a boolean",
            Edn::Int(_) => "an integer",
            Edn::Float(_) => "a float",
            Edn::Str(_) => "a string",
            Edn::Char(_) => "a character",
            Edn::Keyword(_) => "a keyword",
            Edn::Symbol(_) => "a symbol",
            Edn::List(_) => "a list",
            Edn::Vector(_) => "a vector",
            Edn::Set(_) => "a set",
            Edn::Map(_) => "a map",
            Edn::Tagged(..) => "a tagged value",
        }
    }
}

/// Prints the value back as EDN (as Clojure's `pr-str` would).
impl fmt::Display for Edn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn seq(f: &mut fmt::Formatter<'_>, open: &str, items: &[Edn], close: &str) -> fmt::Result {
            f.write_str(open)?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    f.write_str(" ")?;
                }
                write!(f, "{item}")?;
            }
            f.write_str(close)
        }
        match self {
            Edn::Nil => f.write_str("nil"),
            Edn::Bool(b) => write!(f, "{b}"),
            Edn::Int(i) => write!(f, "{i}"),
            Edn::Float(x) => write!(f, "{x:?}"),
            Edn::Str(s) => write!(f, "{s:?}"),
            Edn::Char(c) => match c {
                '\n' => f.write_str("\\newline"),
                ' ' => f.write_str("\\space"),
                '\t' => f.write_str("\\tab"),
                '\r' => f.write_str("\\return"),
                c => write!(f, "\\{c}"),
            },
            Edn::Keyword(k) => write!(f, ":{k}"),
            Edn::Symbol(s) => f.write_str(s),
            Edn::List(items) => seq(f, "(", items, ")"),
            Edn::Vector(items) => seq(f, "[", items, "]"),
            Edn::Set(items) => seq(f, "#{", items, "}"),
            Edn::Map(pairs) => {
                f.write_str("{")?;
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k} {v}")?;
                }
                f.write_str("}")
            }
            Edn::Tagged(tag, inner) => write!(f, "#{tag} {inner}"),
        }
    }
}

/// Parses a Jepsen EDN history into operations.
pub fn parse(text: &str) -> Result<Vec<Op>> {
    let mut reader = Reader::new(text, 1, 1);
    let mut raws = Vec::new();
    reader.skip_ws()?;
    let vector_close = match reader.peek() {
        Some(b'[') => Some(b']'),
        Some(b'(') => Some(b')'),
        _ => None,
    };
    if let Some(close) = vector_close {
        let open = reader.here();
        reader.bump();
        loop {
            reader.skip_ws()?;
            match reader.peek() {
                None => return Err(reader.error_at(open, "the history vector is never closed")),
                Some(b) if b == close => {
                    reader.bump();
                    break;
                }
                Some(_) => {
                    let at = reader.here();
                    let form = reader.read(1)?;
                    raws.push(RawOp::from_form(form, at.line)?);
                }
            }
        }
        reader.skip_ws()?;
        if reader.peek().is_some() {
            return Err(reader.error_at(reader.here(), "unexpected form after the history vector"));
        }
    } else {
        while reader.peek().is_some() {
            let at = reader.here();
            let form = reader.read(0)?;
            raws.push(RawOp::from_form(form, at.line)?);
            reader.skip_ws()?;
        }
    }
    finish(raws)
}

/// Reads exactly one EDN form from `text`, which starts at `line` and `column` of its file
/// (for error messages).
pub fn read_value(text: &str, line: usize, column: usize) -> Result<Edn> {
    let mut reader = Reader::new(text, line, column);
    let value = reader.read_one()?;
    reader.skip_ws()?;
    if reader.peek().is_some() {
        return Err(reader.error_at(reader.here(), "unexpected text after the value"));
    }
    Ok(value)
}

/// Reads the EDN form at the start of `text` (after any whitespace), which starts at `line` and
/// `column` of its file; returns it and the rest of `text` after it.
pub fn read_first(text: &str, line: usize, column: usize) -> Result<(Edn, &str)> {
    let mut reader = Reader::new(text, line, column);
    let value = reader.read_one()?;
    Ok((value, &text[reader.pos..]))
}

/// One operation as read from a Jepsen file, before keys, indices and times are settled.
#[derive(Debug, Clone)]
pub struct RawOp {
    /// The line of the file the operation starts on.
    pub line: usize,
    /// Invocation or completion kind.
    pub kind: OpType,
    /// The process.
    pub process: Process,
    /// The function name.
    pub f: String,
    /// The value as written (a `[key value]` tuple in independent histories).
    pub value: Edn,
    /// `:index`, if given.
    pub index: Option<u64>,
    /// `:time` in nanoseconds, if given.
    pub time: Option<u64>,
    /// `:error`, printed as a string.
    pub error: Option<String>,
    /// `:node`, if given.
    pub node: Option<String>,
    /// `:zxid`, if given.
    pub zxid: Option<i64>,
    /// `:version`, if given.
    pub version: Option<i32>,
}

impl RawOp {
    /// Reads an op map (or a record literal tagging one) that starts on `line`.
    fn from_form(form: Edn, line: usize) -> Result<RawOp> {
        let pairs = match form {
            Edn::Map(pairs) => pairs,
            Edn::Tagged(tag, inner) => match *inner {
                Edn::Map(pairs) => pairs,
                other => bail!(
                    "line {line}: expected an op map, found #{tag} {}",
                    other.kind()
                ),
            },
            other => bail!("line {line}: expected an op map, found {}", other.kind()),
        };
        let mut kind = None;
        let mut process = None;
        let mut f = None;
        let mut raw = RawOp {
            line,
            kind: OpType::Invoke,
            process: Process::NEMESIS,
            f: String::new(),
            value: Edn::Nil,
            index: None,
            time: None,
            error: None,
            node: None,
            zxid: None,
            version: None,
        };
        for (k, v) in pairs {
            let Edn::Keyword(name) = k else { continue };
            match name.as_str() {
                "type" => kind = Some(op_type(&v).map_err(|e| anyhow!("line {line}: {e}"))?),
                "process" => {
                    process = Some(process_of(&v).map_err(|e| anyhow!("line {line}: {e}"))?)
                }
                "f" => f = Some(v.as_name()),
                "value" => raw.value = v,
                "index" => raw.index = Some(non_negative(&v, "index", line)?),
                "time" => raw.time = Some(non_negative(&v, "time", line)?),
                "error" => raw.error = Some(v.as_name()),
                "node" => raw.node = Some(v.as_name()),
                "zxid" => match v {
                    Edn::Int(z) => raw.zxid = Some(z),
                    other => bail!("line {line}: :zxid must be an integer, found {other}"),
                },
                "version" => match v {
                    Edn::Int(n) if i32::try_from(n).is_ok() => raw.version = Some(n as i32),
                    other => bail!("line {line}: :version must be a 32-bit integer, found {other}"),
                },
                _ => {}
            }
        }
        raw.kind = kind.ok_or_else(|| anyhow!("line {line}: op map has no :type"))?;
        raw.process = process.ok_or_else(|| anyhow!("line {line}: op map has no :process"))?;
        raw.f = f.ok_or_else(|| anyhow!("line {line}: op map has no :f"))?;
        Ok(raw)
    }
}

/// Reads an op type: `:invoke`, `:ok`, `:fail` or `:info`.
pub fn op_type(v: &Edn) -> Result<OpType> {
    match v {
        Edn::Keyword(k) => match k.as_str() {
            "invoke" => Ok(OpType::Invoke),
            "ok" => Ok(OpType::Ok),
            "fail" => Ok(OpType::Fail),
            "info" => Ok(OpType::Info),
            _ => bail!("unknown op :type {v} (expected :invoke, :ok, :fail or :info)"),
        },
        _ => bail!("op :type must be a keyword, found {v}"),
    }
}

/// Reads a process: a non-negative integer is a client; a keyword (`:nemesis`) or string is
/// the fault injector's.
pub fn process_of(v: &Edn) -> Result<Process> {
    match v {
        Edn::Int(p) if *p >= 0 => Ok(Process::Client(*p as u64)),
        Edn::Keyword(_) | Edn::Str(_) => Ok(Process::NEMESIS),
        _ => bail!(
            "unsupported :process {v} (expected a non-negative integer, or a keyword such as \
             :nemesis)"
        ),
    }
}

fn non_negative(v: &Edn, what: &str, line: usize) -> Result<u64> {
    match v {
        Edn::Int(n) if *n >= 0 => Ok(*n as u64),
        other => bail!("line {line}: :{what} must be a non-negative integer, found {other}"),
    }
}

/// Settles keys (independent tuples), values, indices and times of raw operations.
pub fn finish(raws: Vec<RawOp>) -> Result<Vec<Op>> {
    let independent = is_independent(&raws);
    let indexed =
        raws.iter().all(|r| r.index.is_some()) && raws.windows(2).all(|w| w[0].index < w[1].index);
    let timed = raws.iter().any(|r| r.time.is_some());
    let mut invoked_key: HashMap<u64, Option<String>> = HashMap::new();
    let mut last_time = 0;
    let mut ops = Vec::with_capacity(raws.len());
    for (position, raw) in raws.into_iter().enumerate() {
        let (key, value) = match (independent, raw.process) {
            (true, Process::Client(p)) => {
                let (key, value) = match raw.value {
                    Edn::Vector(mut kv) if kv.len() == 2 && kv[0].is_scalar_key() => {
                        let v = kv.pop().expect("two elements");
                        let k = kv.pop().expect("one element");
                        (Some(k.as_name()), v)
                    }
                    other if raw.kind != OpType::Invoke => match invoked_key.get(&p) {
                        Some(key) => (key.clone(), other),
                        None => bail!(
                            "line {}: completion of process {p} is not a [key value] tuple and \
                             follows no invocation to take its key from",
                            raw.line
                        ),
                    },
                    other => bail!(
                        "line {}: invocation value {other} is not a [key value] tuple",
                        raw.line
                    ),
                };
                if raw.kind == OpType::Invoke {
                    invoked_key.insert(p, key.clone());
                } else {
                    invoked_key.remove(&p);
                }
                (key, value)
            }
            _ => (None, raw.value),
        };
        let time = match raw.time {
            Some(t) => t,
            None if timed => last_time,
            None => position as u64,
        };
        last_time = time;
        ops.push(Op {
            index: if indexed {
                raw.index.expect("all indexed")
            } else {
                position as u64
            },
            time,
            kind: raw.kind,
            process: raw.process,
            f: raw.f,
            value: value.to_json(),
            key,
            node: raw.node,
            error: raw.error,
            zxid: raw.zxid,
            version: raw.version,
        });
    }
    Ok(ops)
}

/// Whether the history's client values are `jepsen.independent` `[key value]` tuples.
fn is_independent(raws: &[RawOp]) -> bool {
    let mut any = false;
    for raw in raws {
        if raw.process == Process::NEMESIS || raw.kind == OpType::Info {
            continue;
        }
        match &raw.value {
            Edn::Vector(kv) if kv.len() == 2 && kv[0].is_scalar_key() => {
                if raw.f == "cas" && !matches!(kv[1], Edn::Vector(_) | Edn::Nil) {
                    return false;
                }
                any = true;
            }
            _ => return false,
        }
    }
    any
}

/// A place in the text: its 1-based line, where that line starts and the byte offset.
#[derive(Debug, Clone, Copy)]
struct Pos {
    line: usize,
    line_start: usize,
    offset: usize,
}

/// A cursor over EDN text that tracks its line.
struct Reader<'a> {
    text: &'a str,
    pos: usize,
    line: usize,
    line_start: usize,
    /// Column of the text's first character on its first line (1 for a whole file).
    first_column: usize,
    first_line: usize,
}

fn is_delimiter(b: u8) -> bool {
    matches!(
        b,
        b' ' | b'\t' | b'\n' | b'\r' | b',' | b'(' | b')' | b'[' | b']' | b'{' | b'}' | b'"' | b';'
    )
}

impl<'a> Reader<'a> {
    fn new(text: &'a str, line: usize, column: usize) -> Self {
        Reader {
            text,
            pos: 0,
            line,
            line_start: 0,
            first_column: column,
            first_line: line,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.text.as_bytes().get(self.pos + ahead).copied()
    }

    /// Advances one byte, counting lines.
    fn bump(&mut self) {
        if self.peek() == Some(b'\n') {
            self.line += 1;
            self.line_start = self.pos + 1;
        }
        self.pos += 1;
    }

    fn here(&self) -> Pos {
        Pos {
            line: self.line,
            line_start: self.line_start,
            offset: self.pos,
        }
    }

    /// The 1-based column of a place, counted in characters (only computed for errors).
    fn column(&self, at: Pos) -> usize {
        let chars = self.text[at.line_start..at.offset].chars().count();
        if at.line == self.first_line {
            chars + self.first_column
        } else {
            chars + 1
        }
    }

    fn error_at(&self, at: Pos, message: impl fmt::Display) -> anyhow::Error {
        anyhow!("line {}, column {}: {message}", at.line, self.column(at))
    }

    /// Skips whitespace, commas, `;` comments and `#_` discarded forms.
    fn skip_ws(&mut self) -> Result<()> {
        while let Some(b) = self.peek() {
            match b {
                b' ' | b'\t' | b'\n' | b'\r' | b',' => self.bump(),
                b';' => {
                    while !matches!(self.peek(), None | Some(b'\n')) {
                        self.bump();
                    }
                }
                b'#' if self.peek_at(1) == Some(b'_') => {
                    self.bump();
                    self.bump();
                    self.skip_ws()?;
                    if self.peek().is_none() {
                        return Err(self.error_at(self.here(), "nothing to discard after #_"));
                    }
                    self.read(0)?;
                }
                _ => break,
            }
        }
        Ok(())
    }

    /// Skips whitespace and reads one form, which must be there.
    fn read_one(&mut self) -> Result<Edn> {
        self.skip_ws()?;
        if self.peek().is_none() {
            return Err(self.error_at(self.here(), "expected an EDN value, found nothing"));
        }
        self.read(0)
    }

    /// Reads one form; whitespace before it must already be skipped.
    fn read(&mut self, depth: usize) -> Result<Edn> {
        let at = self.here();
        if depth > MAX_DEPTH {
            return Err(self.error_at(at, format!("nesting deeper than {MAX_DEPTH}")));
        }
        let Some(b) = self.peek() else {
            return Err(self.error_at(at, "unexpected end of input"));
        };
        match b {
            b'(' => {
                self.bump();
                Ok(Edn::List(self.read_seq(b')', at, depth)?))
            }
            b'[' => {
                self.bump();
                Ok(Edn::Vector(self.read_seq(b']', at, depth)?))
            }
            b'{' => {
                self.bump();
                let items = self.read_seq(b'}', at, depth)?;
                Ok(Edn::Map(pairs(items).ok_or_else(|| {
                    self.error_at(at, "map literal has an odd number of forms")
                })?))
            }
            b')' | b']' | b'}' => Err(self.error_at(at, format!("unexpected '{}'", b as char))),
            b'"' => self.read_string(at),
            b'\\' => self.read_char(at),
            b'#' => self.read_dispatch(at, depth),
            _ => {
                let token = self.read_token();
                atom(token).map_err(|e| self.error_at(at, e))
            }
        }
    }

    fn read_seq(&mut self, close: u8, open: Pos, depth: usize) -> Result<Vec<Edn>> {
        let mut items = Vec::new();
        loop {
            self.skip_ws()?;
            match self.peek() {
                None => {
                    return Err(self.error_at(
                        open,
                        format!("unclosed collection: no '{}' before the end", close as char),
                    ))
                }
                Some(b) if b == close => {
                    self.bump();
                    return Ok(items);
                }
                Some(_) => items.push(self.read(depth + 1)?),
            }
        }
    }

    fn read_token(&mut self) -> &'a str {
        let start = self.pos;
        while let Some(b) = self.peek() {
            if is_delimiter(b) {
                break;
            }
            self.bump();
        }
        &self.text[start..self.pos]
    }

    fn read_string(&mut self, at: Pos) -> Result<Edn> {
        self.bump();
        let mut out = String::new();
        loop {
            let Some(c) = self.text[self.pos..].chars().next() else {
                return Err(self.error_at(at, "unterminated string"));
            };
            match c {
                '"' => {
                    self.bump();
                    return Ok(Edn::Str(out));
                }
                '\\' => {
                    let escape_at = self.here();
                    self.bump();
                    let escaped = match self.peek() {
                        Some(b'n') => '\n',
                        Some(b't') => '\t',
                        Some(b'r') => '\r',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'u') => {
                            let hex = self.text.get(self.pos + 1..self.pos + 5);
                            let c = hex
                                .and_then(|h| u32::from_str_radix(h, 16).ok())
                                .and_then(char::from_u32)
                                .ok_or_else(|| self.error_at(escape_at, "bad \\u escape"))?;
                            for _ in 0..4 {
                                self.bump();
                            }
                            c
                        }
                        _ => return Err(self.error_at(escape_at, "unknown string escape")),
                    };
                    self.bump();
                    out.push(escaped);
                }
                c => {
                    for _ in 0..c.len_utf8() {
                        self.bump();
                    }
                    out.push(c);
                }
            }
        }
    }

    fn read_char(&mut self, at: Pos) -> Result<Edn> {
        self.bump();
        let Some(first) = self.text[self.pos..].chars().next() else {
            return Err(self.error_at(at, "character literal without a character"));
        };
        for _ in 0..first.len_utf8() {
            self.bump();
        }
        if !first.is_alphanumeric() {
            return Ok(Edn::Char(first));
        }
        let rest = self.read_token();
        if rest.is_empty() {
            return Ok(Edn::Char(first));
        }
        let name = format!("{first}{rest}");
        let c = match name.as_str() {
            "newline" => Some('\n'),
            "space" => Some(' '),
            "tab" => Some('\t'),
            "return" => Some('\r'),
            "backspace" => Some('\u{8}'),
            "formfeed" => Some('\u{c}'),
            _ => name
                .strip_prefix('u')
                .filter(|h| h.len() == 4)
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .and_then(char::from_u32),
        };
        c.map(Edn::Char)
            .ok_or_else(|| self.error_at(at, format!("unknown character literal \\{name}")))
    }

    fn read_dispatch(&mut self, at: Pos, depth: usize) -> Result<Edn> {
        self.bump();
        match self.peek() {
            Some(b'{') => {
                self.bump();
                Ok(Edn::Set(self.read_seq(b'}', at, depth)?))
            }
            Some(b) if !is_delimiter(b) && b != b'#' => {
                let tag = self.read_token();
                self.skip_ws()?;
                if self.peek().is_none() {
                    return Err(self.error_at(at, format!("tag #{tag} has no value")));
                }
                let inner = self.read(depth + 1)?;
                Ok(Edn::Tagged(tag.to_string(), Box::new(inner)))
            }
            _ => Err(self.error_at(at, "unsupported '#' form")),
        }
    }
}

/// Groups a map literal's forms into pairs; `None` for an odd count.
fn pairs(items: Vec<Edn>) -> Option<Vec<(Edn, Edn)>> {
    if !items.len().is_multiple_of(2) {
        return None;
    }
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut it = items.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    Some(out)
}

/// Interprets a token: a keyword, number, `nil`, boolean or symbol.
fn atom(token: &str) -> std::result::Result<Edn, String> {
    if let Some(name) = token.strip_prefix(':') {
        if name.is_empty() || name.starts_with(':') {
            return Err(format!("bad keyword {token:?}"));
        }
        return Ok(Edn::Keyword(name.to_string()));
    }
    let bytes = token.as_bytes();
    let numeric = matches!(bytes, [b'0'..=b'9', ..] | [b'+' | b'-', b'0'..=b'9', ..]);
    if numeric {
        return number(token);
    }
    Ok(match token {
        "nil" => Edn::Nil,
        "true" => Edn::Bool(true),
        "false" => Edn::Bool(false),
        _ => Edn::Symbol(token.to_string()),
    })
}

fn number(token: &str) -> std::result::Result<Edn, String> {
    let bad = || format!("bad number {token:?}");
    if let Some(int) = token.strip_suffix('N') {
        return int
            .parse::<i64>()
            .map(Edn::Int)
            .map_err(|_| format!("integer {token} does not fit in 64 bits"));
    }
    let float = |s: &str| match s.parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(Edn::Float(x)),
        _ => Err(bad()),
    };
    if let Some(decimal) = token.strip_suffix('M') {
        return float(decimal);
    }
    if let Some((num, den)) = token.split_once('/') {
        let (Ok(n), Ok(d)) = (num.parse::<i64>(), den.parse::<i64>()) else {
            return Err(bad());
        };
        if d == 0 {
            return Err(bad());
        }
        return Ok(Edn::Float(n as f64 / d as f64));
    }
    if token.contains(['.', 'e', 'E']) {
        return float(token);
    }
    match token.parse::<i64>() {
        Ok(i) => Ok(Edn::Int(i)),
        Err(_)
            if token
                .trim_start_matches(['+', '-'])
                .bytes()
                .all(|b| b.is_ascii_digit()) =>
        {
            Err(format!("integer {token} does not fit in 64 bits"))
        }
        Err(_) => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INDEPENDENT: &str =
        include_str!("../../../tests/fixtures/checker/edn/independent-cas.edn");
    const LINES: &str = include_str!("../../../tests/fixtures/checker/edn/register-lines.edn");
    const UNCLOSED: &str =
        include_str!("../../../tests/fixtures/checker/edn/malformed-unclosed.edn");
    const BAD_TYPE: &str = include_str!("../../../tests/fixtures/checker/edn/malformed-type.edn");

    fn summary(op: &Op) -> (u64, u64, OpType, Process, &str, Value, Option<&str>) {
        (
            op.index,
            op.time,
            op.kind,
            op.process,
            op.f.as_str(),
            op.value.clone(),
            op.key.as_deref(),
        )
    }

    #[test]
    fn independent_history_splits_keys_and_keeps_extras() {
        use serde_json::json;
        use OpType::*;
        let ops = parse(INDEPENDENT).unwrap();
        assert_eq!(ops.len(), 14);
        let c = Process::Client;
        let n = Process::NEMESIS;
        assert_eq!(
            summary(&ops[0]),
            (0, 1000, Invoke, c(0), "write", json!(3), Some("1"))
        );
        assert_eq!(
            summary(&ops[1]),
            (1, 1200, Invoke, c(1), "read", json!(null), Some("2"))
        );
        assert_eq!(
            summary(&ops[5]),
            (
                5,
                2600,
                Info,
                n,
                "start-partition",
                json!(["isolated", {"n1": ["n2", "n3"]}]),
                None
            )
        );
        assert_eq!(
            summary(&ops[6]),
            (6, 3000, Invoke, c(0), "cas", json!([3, 4]), Some("1"))
        );
        assert_eq!(
            summary(&ops[8]),
            (8, 3200, Fail, c(1), "cas", json!([null, 7]), Some("2"))
        );
        assert_eq!(
            ops[8].error.as_deref(),
            Some("[:bad-version \"expected 0\"]")
        );
        // The timed-out completion has no tuple: its key comes from its invocation.
        assert_eq!(
            summary(&ops[9]),
            (9, 9000, Info, c(0), "cas", json!("timed-out"), Some("1"))
        );
        assert_eq!(ops[9].error.as_deref(), Some("timeout"));
        assert_eq!(
            summary(&ops[11]),
            (11, 9300, Ok, c(5), "read", json!(4), Some("1"))
        );
    }

    #[test]
    fn one_map_per_line_history_fills_index_and_time() {
        use serde_json::json;
        use OpType::*;
        let ops = parse(LINES).unwrap();
        let c = Process::Client;
        assert_eq!(ops.len(), 8);
        assert_eq!(
            summary(&ops[1]),
            (1, 20, Invoke, c(1), "cas", json!([null, 2]), None)
        );
        // A record literal reads as the map it tags.
        assert_eq!(
            summary(&ops[3]),
            (3, 40, Ok, c(1), "cas", json!([null, 2]), None)
        );
        // Missing :time takes the previous op's time.
        assert_eq!(
            summary(&ops[4]),
            (4, 40, Invoke, c(0), "write", json!(5), None)
        );
        assert_eq!(ops[5].error.as_deref(), Some("connection lost"));
        assert_eq!(summary(&ops[7]), (7, 110, Ok, c(2), "read", json!(5), None));
        assert!(ops.windows(2).all(|w| w[0].time <= w[1].time));
    }

    #[test]
    fn untimed_history_is_timed_by_position() {
        let ops =
            parse("{:type :invoke :f :read :process 3}\n{:type :ok :f :read :value 1 :process 3}")
                .unwrap();
        assert_eq!(ops.iter().map(|o| o.time).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(ops[0].value, Value::Null);
    }

    #[test]
    fn malformed_histories_name_the_line() {
        let err = parse(UNCLOSED).unwrap_err().to_string();
        assert!(err.starts_with("line 3, column 1:"), "{err}");
        let err = parse(BAD_TYPE).unwrap_err().to_string();
        assert!(err.starts_with("line 4:") && err.contains(":done"), "{err}");
        let err = parse("[{:type :invoke :f :read :process 0}\n 17]").unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 2: expected an op map, found an integer"
        );
        let err = parse("{:type :invoke :f :read}").unwrap_err();
        assert_eq!(err.to_string(), "line 1: op map has no :process");
        let err = parse("{:type :invoke :f :read :process -1}").unwrap_err();
        assert!(err
            .to_string()
            .starts_with("line 1: unsupported :process -1"));
        let err = parse("{:type :invoke :f :read :process 1.5}").unwrap_err();
        assert!(err
            .to_string()
            .starts_with("line 1: unsupported :process 1.5"));
        let err = parse("[{:type :invoke :f :read :process 0}] {}").unwrap_err();
        assert!(err.to_string().starts_with("line 1, column 39:"), "{err}");
    }

    #[test]
    fn independent_completion_without_invocation_is_an_error() {
        let text = "{:type :invoke :f :read :value [1 nil] :process 0}\n\
                    {:type :ok :f :read :value [1 2] :process 0}\n\
                    {:type :info :f :read :value :timed-out :process 4}";
        let err = parse(text).unwrap_err().to_string();
        assert!(err.starts_with("line 3: completion of process 4"), "{err}");
    }

    #[test]
    fn plain_cas_pairs_are_not_mistaken_for_key_tuples() {
        use serde_json::json;
        let text = "{:type :invoke :f :cas :value [1 2] :process 0}\n\
                    {:type :ok :f :cas :value [1 2] :process 0}";
        let ops = parse(text).unwrap();
        assert_eq!(ops[0].key, None);
        assert_eq!(ops[0].value, json!([1, 2]));
    }

    #[test]
    fn reader_handles_edn_syntax() {
        use serde_json::json;
        let v = read_value(
            r#"{:a [1 -2 +3 4N 1.5 2.5M 1/2], "s\"\n" #{\a \newline}, :n nil #_ :gone :b (true false sym)}"#,
            1,
            1,
        )
        .unwrap();
        assert_eq!(
            v.to_json(),
            json!({"a": [1, -2, 3, 4, 1.5, 2.5, 0.5], "s\"\n": ["a", "\n"], "n": null, "b": [true, false, "sym"]})
        );
        assert_eq!(
            read_value("[:a \"x\" {:k 1}]", 1, 1).unwrap().to_string(),
            "[:a \"x\" {:k 1}]"
        );
    }

    #[test]
    fn reader_errors_carry_line_and_column() {
        let cases = [
            ("[1 2", "line 7, column 5: unclosed collection"),
            ("{:a}", "line 7, column 5: map literal has an odd number"),
            ("\"abc", "line 7, column 5: unterminated string"),
            (
                "99999999999999999999",
                "line 7, column 5: integer 99999999999999999999",
            ),
            ("1 2", "line 7, column 7: unexpected text after the value"),
            ("]", "line 7, column 5: unexpected ']'"),
            ("[1\n 1e999]", "line 8, column 2: bad number"),
        ];
        for (text, expected) in cases {
            let err = read_value(text, 7, 5).unwrap_err().to_string();
            assert!(err.starts_with(expected), "{text:?}: {err}");
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let text = "[".repeat(10_000);
        let err = read_value(&text, 1, 1).unwrap_err().to_string();
        assert!(err.contains("nesting deeper than"), "{err}");
    }
}
