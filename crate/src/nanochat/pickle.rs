//! A small pickle reader for nanochat's `tokenizer.pkl`: a pickled tiktoken `Encoding`, whose
//! state is `{name, pat_str, mergeable_ranks: {bytes: int}, special_tokens: {str: int}}`; also
//! for nanoGPT's `meta.pkl` and the `data.pkl` of its torch archives (crate::nanogpt), whose
//! tensors are persistent references. candle's unpickler has no `bytes` and trusts length
//! fields, so this one covers the opcodes Python emits for plain data (protocols 2–5) and
//! nothing that executes code. Hostile input cannot exhaust memory or the stack: nesting is
//! capped, every length is checked against the bytes left, and every copy out of the memo is
//! charged to a budget proportional to the file's size.

use std::collections::HashMap;

use crate::error::{Error, Result};

const MAX_DEPTH: u32 = 64;
/// Each memo fetch copies its value; copies may add up to this many times the file's size.
const COPY_BUDGET_PER_BYTE: usize = 16;

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    Global(String, String),
    Mark,
    Container(Container),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Tuple,
    List,
    /// Keys and values alternate.
    Dict,
    /// `[class, args]`, plus the state once BUILD has run.
    Object,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Container {
    pub kind: Kind,
    pub items: Vec<Value>,
    depth: u32,
    size: usize,
}

impl Value {
    fn depth(&self) -> u32 {
        match self {
            Value::Container(c) => c.depth,
            _ => 0,
        }
    }
    fn size(&self) -> usize {
        match self {
            Value::Str(s) => s.len() + 1,
            Value::Bytes(b) => b.len() + 1,
            Value::Global(a, b) => a.len() + b.len() + 1,
            Value::Container(c) => c.size,
            _ => 1,
        }
    }
    pub fn as_dict(&self) -> Option<impl Iterator<Item = (&Value, &Value)>> {
        match self {
            Value::Container(c) if c.kind == Kind::Dict => Some(c.items.chunks_exact(2).map(|kv| (&kv[0], &kv[1]))),
            _ => None,
        }
    }
}

fn container(kind: Kind, items: Vec<Value>) -> Result<Value> {
    let depth = 1 + items.iter().map(Value::depth).max().unwrap_or(0);
    if depth > MAX_DEPTH {
        return Err(bad("objects are nested too deeply"));
    }
    let size = 1 + items.iter().map(Value::size).sum::<usize>();
    Ok(Value::Container(Container { kind, items, depth, size }))
}

fn bad(why: impl std::fmt::Display) -> Error {
    Error::corrupt(format!("not a valid pickle: {why}"))
}

struct Machine<'a> {
    data: &'a [u8],
    at: usize,
    stack: Vec<Value>,
    memo: HashMap<u32, Value>,
    budget: usize,
}

/// Runs the pickle program and returns the object it builds.
pub fn load(data: &[u8]) -> Result<Value> {
    let mut m = Machine { data, at: 0, stack: Vec::new(), memo: HashMap::new(), budget: data.len().saturating_mul(COPY_BUDGET_PER_BYTE) };
    loop {
        let op = m.take(1)?[0];
        if op == b'.' {
            return m.pop();
        }
        m.step(op)?;
    }
}

impl<'a> Machine<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.data.len()).ok_or_else(|| bad("truncated"))?;
        let out = &self.data[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn uint(&mut self, n: usize) -> Result<u64> {
        Ok(self.take(n)?.iter().rev().fold(0u64, |acc, &b| (acc << 8) | b as u64))
    }
    fn len(&mut self, n: usize) -> Result<usize> {
        usize::try_from(self.uint(n)?).map_err(|_| bad("length out of range"))
    }
    fn line(&mut self) -> Result<String> {
        let rest = &self.data[self.at..];
        let end = rest.iter().position(|&b| b == b'\n').ok_or_else(|| bad("unterminated line"))?;
        self.at += end + 1;
        Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
    }
    fn pop(&mut self) -> Result<Value> {
        self.stack.pop().ok_or_else(|| bad("stack underflow"))
    }
    fn top(&mut self) -> Result<&mut Value> {
        self.stack.last_mut().ok_or_else(|| bad("stack underflow"))
    }
    /// Everything above the topmost mark, which is removed.
    fn pop_mark(&mut self) -> Result<Vec<Value>> {
        let mark = self.stack.iter().rposition(|v| *v == Value::Mark).ok_or_else(|| bad("no mark"))?;
        let items = self.stack.split_off(mark + 1);
        self.stack.pop();
        Ok(items)
    }
    fn tuple(&mut self, n: usize) -> Result<()> {
        let at = self.stack.len().checked_sub(n).ok_or_else(|| bad("stack underflow"))?;
        let items = self.stack.split_off(at);
        self.stack.push(container(Kind::Tuple, items)?);
        Ok(())
    }
    /// Appends to the list or dict below the new items (APPEND(S), SETITEM(S)).
    fn extend(&mut self, items: Vec<Value>, kind: Kind) -> Result<()> {
        if kind == Kind::Dict && !items.len().is_multiple_of(2) {
            return Err(bad("odd number of dict items"));
        }
        let target = match self.pop()? {
            // A dict subclass made by REDUCE and filled by SETITEMS (torch's state dicts are
            // `OrderedDict`s): its items are what a reader wants, so it becomes a plain dict.
            Value::Container(c) if c.kind == Kind::Object && kind == Kind::Dict && c.items.len() == 2 => container(Kind::Dict, Vec::new())?,
            other => other,
        };
        match target {
            // Updated in place: rebuilding the container per APPEND would make a long list
            // quadratic.
            Value::Container(mut c) if c.kind == kind => {
                c.depth = c.depth.max(1 + items.iter().map(Value::depth).max().unwrap_or(0));
                if c.depth > MAX_DEPTH {
                    return Err(bad("objects are nested too deeply"));
                }
                c.size += items.iter().map(Value::size).sum::<usize>();
                c.items.extend(items);
                self.stack.push(Value::Container(c));
                Ok(())
            }
            _ => Err(bad("items added to something that is not a list or dict")),
        }
    }
    fn memo_get(&mut self, key: u32) -> Result<()> {
        let v = self.memo.get(&key).ok_or_else(|| bad("unknown memo key"))?;
        self.budget = self.budget.checked_sub(v.size()).ok_or_else(|| bad("too many memo copies"))?;
        let v = v.clone();
        self.stack.push(v);
        Ok(())
    }
    fn memo_put(&mut self, key: u32) -> Result<()> {
        let v = self.top()?.clone();
        self.budget = self.budget.checked_sub(v.size()).ok_or_else(|| bad("too many memo copies"))?;
        self.memo.insert(key, v);
        Ok(())
    }

    fn step(&mut self, op: u8) -> Result<()> {
        match self.atom(op)? {
            Some(v) => {
                self.stack.push(v);
                Ok(())
            }
            None => self.structure(op),
        }
    }

    /// Opcodes that push one plain value; `None` for the rest.
    fn atom(&mut self, op: u8) -> Result<Option<Value>> {
        let sized = |m: &mut Self, n: usize| -> Result<&'a [u8]> {
            let len = m.len(n)?;
            m.take(len)
        };
        Ok(Some(match op {
            b'N' => Value::None,
            0x88 => Value::Bool(true),
            0x89 => Value::Bool(false),
            b'K' => Value::Int(self.uint(1)? as i64),
            b'M' => Value::Int(self.uint(2)? as i64),
            b'J' => Value::Int(self.uint(4)? as u32 as i32 as i64),
            0x8a => self.long1()?,
            b'G' => Value::Float(f64::from_be_bytes(self.take(8)?.try_into().map_err(|_| bad("float"))?)),
            0x8c => text(sized(self, 1)?)?,
            b'X' => text(sized(self, 4)?)?,
            0x8d => text(sized(self, 8)?)?,
            b'C' => Value::Bytes(sized(self, 1)?.to_vec()),
            b'B' => Value::Bytes(sized(self, 4)?.to_vec()),
            0x8e => Value::Bytes(sized(self, 8)?.to_vec()),
            b'c' => Value::Global(self.line()?, self.line()?),
            0x93 => match (self.pop()?, self.pop()?) {
                (Value::Str(name), Value::Str(module)) => Value::Global(module, name),
                _ => return Err(bad("STACK_GLOBAL needs two strings")),
            },
            _ => return Ok(None),
        }))
    }

    /// LONG1: little-endian two's complement; more than 8 bytes is never a token id.
    fn long1(&mut self) -> Result<Value> {
        let n = self.len(1)?;
        if n > 8 {
            return Err(bad("integer too large"));
        }
        let bytes = self.take(n)?;
        let mut v = bytes.iter().rev().fold(0i64, |acc, &b| (acc << 8) | b as i64);
        if n > 0 && n < 8 && bytes[n - 1] & 0x80 != 0 {
            v -= 1i64 << (8 * n);
        }
        Ok(Value::Int(v))
    }

    /// Framing, containers, objects and the memo.
    fn structure(&mut self, op: u8) -> Result<()> {
        match op {
            0x80 => drop(self.take(1)?), // PROTO
            0x95 => drop(self.take(8)?), // FRAME
            b'(' => self.stack.push(Value::Mark),
            b'0' => drop(self.pop()?),
            b')' => self.tuple(0)?,
            0x85..=0x87 => self.tuple((op - 0x84) as usize)?,
            b't' | b'l' | b'd' => {
                let items = self.pop_mark()?;
                let kind = match op {
                    b't' => Kind::Tuple,
                    b'l' => Kind::List,
                    _ if !items.len().is_multiple_of(2) => return Err(bad("odd number of dict items")),
                    _ => Kind::Dict,
                };
                self.stack.push(container(kind, items)?)
            }
            b']' => self.stack.push(container(Kind::List, Vec::new())?),
            b'}' => self.stack.push(container(Kind::Dict, Vec::new())?),
            b'a' => {
                let v = self.pop()?;
                self.extend(vec![v], Kind::List)?
            }
            b's' => {
                let (v, k) = (self.pop()?, self.pop()?);
                self.extend(vec![k, v], Kind::Dict)?
            }
            b'e' | b'u' => {
                let items = self.pop_mark()?;
                self.extend(items, if op == b'e' { Kind::List } else { Kind::Dict })?
            }
            // BINPERSID: a torch storage reference, recorded as an object of the reserved
            // class `persistent_load`.
            b'Q' => {
                let id = self.pop()?;
                self.stack.push(container(Kind::Object, vec![Value::Global(String::new(), "persistent_load".into()), id])?)
            }
            // NEWOBJ, REDUCE: recorded as an object, never called.
            0x81 | b'R' => {
                let (args, class) = (self.pop()?, self.pop()?);
                self.stack.push(container(Kind::Object, vec![class, args])?)
            }
            b'b' => self.build()?,
            0x94 => self.memo_put(self.memo.len() as u32)?, // MEMOIZE
            b'q' | b'r' => {
                let key = self.uint(if op == b'q' { 1 } else { 4 })? as u32;
                self.memo_put(key)?
            }
            b'h' | b'j' => {
                let key = self.uint(if op == b'h' { 1 } else { 4 })? as u32;
                self.memo_get(key)?
            }
            other => return Err(bad(format!("unsupported opcode 0x{other:02x} at byte {}", self.at - 1))),
        }
        Ok(())
    }

    /// BUILD: attaches the state to the object below it.
    fn build(&mut self) -> Result<()> {
        let state = self.pop()?;
        match self.pop()? {
            Value::Container(c) if c.kind == Kind::Object && c.items.len() == 2 => {
                let mut items = c.items;
                items.push(state);
                self.stack.push(container(Kind::Object, items)?);
                Ok(())
            }
            // Attributes of a dict subclass read as a dict (a state dict's `_metadata`): dropped.
            dict @ Value::Container(_) if dict.as_dict().is_some() => {
                self.stack.push(dict);
                Ok(())
            }
            _ => Err(bad("BUILD on something that is not an object")),
        }
    }
}

fn text(bytes: &[u8]) -> Result<Value> {
    Ok(Value::Str(std::str::from_utf8(bytes).map_err(|_| bad("invalid UTF-8 in a string"))?.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_protocol_4_dict_with_bytes() {
        // pickle.dumps({"a": {b"\xff": 1}, "b": [1, -2]}, protocol=4)
        let data = b"\x80\x04\x95!\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01a\x94}\x94C\x01\xff\x94K\x01s\x8c\x01b\x94]\x94(K\x01J\xfe\xff\xff\xffeu.";
        let v = load(data).unwrap();
        let items: Vec<_> = v.as_dict().unwrap().collect();
        assert_eq!(items[0].0, &Value::Str("a".into()));
        let inner: Vec<_> = items[0].1.as_dict().unwrap().collect();
        assert_eq!(inner, vec![(&Value::Bytes(vec![0xff]), &Value::Int(1))]);
        match items[1].1 {
            Value::Container(c) => assert_eq!(c.items, vec![Value::Int(1), Value::Int(-2)]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn hostile_input_is_an_error() {
        assert!(load(b"").is_err());
        assert!(load(b"\x80\x04(((").is_err());
        assert!(load(b"X\xff\xff\xff\xff").is_err());
        assert!(load(&[b'('; 1000].iter().chain(b"t".repeat(200).iter()).copied().collect::<Vec<_>>()).is_err());
        // One 60 kB bytes object fetched from the memo 100k times: 6 GB if copied freely.
        let mut bomb = b"B\x60\xea\x00\x00".to_vec();
        bomb.extend(vec![0u8; 60_000]);
        bomb.extend(b"\x94(");
        bomb.extend(b"h\x00".repeat(100_000));
        bomb.extend(b"l.");
        assert!(load(&bomb).is_err());
        // 300k single APPENDs to one list load in linear time.
        let mut appends = b"]".to_vec();
        appends.extend(b"N".iter().chain(b"a").copied().cycle().take(600_000));
        appends.push(b'.');
        let start = std::time::Instant::now();
        assert!(load(&appends).is_ok());
        assert!(start.elapsed().as_secs_f64() < 2.0, "{:?}", start.elapsed());
    }
}
