//! The query model without a float copy of its weights.
//!
//! The int8 MiniLM stores each weight as `Cast(int8) * scale`. ONNX Runtime's constant
//! folding turns every such product into a float initializer at load: fast queries,
//! but 4× the weights' bytes in memory (106 MB of the session's 192). Without folding
//! the products run at every query (65 ms). This rewrite, done in memory on the
//! model's bytes before the session is made (the file and its pinned sha256 stay
//! as they are), keeps the weights int8 and leaves nothing to fold:
//! - `MatMul(x, Cast(W) * s)` with a per-column scale becomes
//!   `com.microsoft.DynamicQuantizeMatMul(x, W, s)`: the int8 GEMM;
//! - `Gather(Cast(E) * s, ids)` with a per-row scale (the embedding tables) becomes
//!   `Cast(Gather(E, ids)) * Gather(s, ids)`: only the looked-up rows are widened.
//!
//! It works on the protobuf wire format: fields it does not touch are copied byte for
//! byte, so nothing it does not understand is lost. A model without the pattern comes
//! back as `None`, and the caller loads the file as it is.

use std::collections::{HashMap, HashSet};

/// One field of a protobuf message: its number, wire type, the whole encoded field
/// (tag included) and, for length-delimited fields, the payload.
#[derive(Clone, Copy)]
struct Field<'a> {
    num: u64,
    raw: &'a [u8],
    payload: &'a [u8],
    /// A varint field's value.
    value: u64,
}

fn varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn fields(b: &[u8]) -> Option<Vec<Field<'_>>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < b.len() {
        let start = pos;
        let tag = varint(b, &mut pos)?;
        let mut value = 0;
        let payload = match tag & 7 {
            0 => {
                value = varint(b, &mut pos)?;
                &b[pos..pos]
            }
            1 => {
                pos = pos.checked_add(8).filter(|&p| p <= b.len())?;
                &b[pos..pos]
            }
            2 => {
                let len = usize::try_from(varint(b, &mut pos)?).ok()?;
                let end = pos.checked_add(len).filter(|&e| e <= b.len())?;
                let p = &b[pos..end];
                pos = end;
                p
            }
            5 => {
                pos = pos.checked_add(4).filter(|&p| p <= b.len())?;
                &b[pos..pos]
            }
            _ => return None,
        };
        out.push(Field { num: tag >> 3, raw: &b[start..pos], payload, value });
    }
    Some(out)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn put_bytes(out: &mut Vec<u8>, num: u64, b: &[u8]) {
    put_varint(out, (num << 3) | 2);
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A node: what the rewrite reads and changes, and its other fields (attributes,
/// doc string) as they were.
#[derive(Clone, Default)]
struct Node {
    inputs: Vec<String>,
    outputs: Vec<String>,
    name: String,
    op: String,
    domain: String,
    rest: Vec<u8>,
}

impl Node {
    fn parse(b: &[u8]) -> Option<Node> {
        let mut n = Node::default();
        for f in fields(b)? {
            match f.num {
                1 => n.inputs.push(text(f.payload)),
                2 => n.outputs.push(text(f.payload)),
                3 => n.name = text(f.payload),
                4 => n.op = text(f.payload),
                7 => n.domain = text(f.payload),
                _ => n.rest.extend_from_slice(f.raw),
            }
        }
        Some(n)
    }

    fn new(op: &str, domain: &str, inputs: &[&str], outputs: &[&str], name: String) -> Node {
        Node {
            inputs: inputs.iter().map(|s| (*s).to_owned()).collect(),
            outputs: outputs.iter().map(|s| (*s).to_owned()).collect(),
            name,
            op: op.to_owned(),
            domain: domain.to_owned(),
            rest: Vec::new(),
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        for i in &self.inputs {
            put_bytes(&mut b, 1, i.as_bytes());
        }
        for o in &self.outputs {
            put_bytes(&mut b, 2, o.as_bytes());
        }
        put_bytes(&mut b, 3, self.name.as_bytes());
        put_bytes(&mut b, 4, self.op.as_bytes());
        b.extend_from_slice(&self.rest);
        if !self.domain.is_empty() {
            put_bytes(&mut b, 7, self.domain.as_bytes());
        }
        b
    }
}

/// An initializer's name, element type and dims.
struct Init {
    dims: Vec<i64>,
    data_type: u64,
}

fn parse_init(b: &[u8]) -> Option<(String, Init)> {
    let mut name = String::new();
    let mut init = Init { dims: Vec::new(), data_type: 0 };
    for f in fields(b)? {
        match f.num {
            // dims: packed or one by one.
            1 if f.raw.first().is_some_and(|t| t & 7 == 2) => {
                let mut p = 0;
                while p < f.payload.len() {
                    init.dims.push(varint(f.payload, &mut p)? as i64);
                }
            }
            1 => init.dims.push(f.value as i64),
            2 => init.data_type = f.value,
            8 => name = text(f.payload),
            _ => {}
        }
    }
    Some((name, init))
}

/// The initializer `src` (its whole encoded TensorProto) renamed `name` with `dims`.
fn reshaped(src: &[u8], name: &str, dims: &[i64]) -> Option<Vec<u8>> {
    let mut b = Vec::new();
    for d in dims {
        put_varint(&mut b, 1 << 3);
        put_varint(&mut b, *d as u64);
    }
    for f in fields(src)? {
        match f.num {
            1 | 8 => {}
            _ => b.extend_from_slice(f.raw),
        }
    }
    put_bytes(&mut b, 8, name.as_bytes());
    Some(b)
}

const INT8: u64 = 3;
const FLOAT: u64 = 1;
const MS: &str = "com.microsoft";

/// The model's bytes with its int8 weights used as int8 (module docs); `None` when
/// nothing matches or the bytes do not parse.
pub fn rewrite(model: &[u8]) -> Option<Vec<u8>> {
    let top = fields(model)?;
    let graph_field = top.iter().find(|f| f.num == 7)?;
    let graph = fields(graph_field.payload)?;
    let mut nodes: Vec<Node> = Vec::new();
    let mut inits: HashMap<String, (Init, &[u8])> = HashMap::new();
    for f in &graph {
        match f.num {
            1 => nodes.push(Node::parse(f.payload)?),
            5 => {
                let (name, init) = parse_init(f.payload)?;
                inits.insert(name, (init, f.payload));
            }
            _ => {}
        }
    }
    let producer: HashMap<&str, usize> =
        nodes.iter().enumerate().flat_map(|(i, n)| n.outputs.iter().map(move |o| (o.as_str(), i))).collect();
    let mut uses: HashMap<&str, usize> = HashMap::new();
    for n in &nodes {
        for i in &n.inputs {
            *uses.entry(i.as_str()).or_default() += 1;
        }
    }
    // `Cast(int8 init) * float init`, used once: (cast index, mul index, weight, scale).
    let widened = |t: &str| -> Option<(usize, usize, String, String)> {
        let &m = producer.get(t)?;
        let mul = &nodes[m];
        if mul.op != "Mul" || mul.inputs.len() != 2 || uses.get(t) != Some(&1) {
            return None;
        }
        let &c = producer.get(mul.inputs[0].as_str())?;
        let cast = &nodes[c];
        if cast.op != "Cast" || uses.get(mul.inputs[0].as_str()) != Some(&1) {
            return None;
        }
        let (w, s) = (&cast.inputs[0], &mul.inputs[1]);
        let (wi, si) = (&inits.get(w)?.0, &inits.get(s)?.0);
        (wi.data_type == INT8 && si.data_type == FLOAT && wi.dims.len() == 2).then(|| (c, m, w.clone(), s.clone()))
    };
    let mut drop: HashSet<usize> = HashSet::new();
    let mut replace: HashMap<usize, Vec<Node>> = HashMap::new();
    let mut new_inits: Vec<Vec<u8>> = Vec::new();
    let mut made: HashSet<String> = HashSet::new();
    for (i, n) in nodes.iter().enumerate() {
        match n.op.as_str() {
            "MatMul" if n.domain.is_empty() && n.inputs.len() == 2 => {
                let Some((c, m, w, s)) = widened(&n.inputs[1]) else { continue };
                let cols = inits[&w].0.dims[1];
                let sd = &inits[&s].0.dims;
                if !(sd == &[1, cols] || sd == &[cols]) {
                    continue;
                }
                let s1 = format!("{s}__1d");
                if sd.len() == 2 && made.insert(s1.clone()) {
                    new_inits.push(reshaped(inits[&s].1, &s1, &[cols])?);
                }
                let scale = if sd.len() == 2 { s1.as_str() } else { s.as_str() };
                let out: Vec<&str> = n.outputs.iter().map(String::as_str).collect();
                replace.insert(
                    i,
                    vec![Node::new(
                        "DynamicQuantizeMatMul",
                        MS,
                        &[&n.inputs[0], &w, scale],
                        &out,
                        format!("{}__int8", n.name),
                    )],
                );
                drop.extend([c, m]);
            }
            "Gather" if n.domain.is_empty() && n.inputs.len() == 2 && n.outputs.len() == 1 => {
                let Some((c, m, w, s)) = widened(&n.inputs[0]) else { continue };
                let rows = inits[&w].0.dims[0];
                if inits[&s].0.dims != [rows, 1] {
                    continue;
                }
                let (ids, out) = (n.inputs[1].as_str(), n.outputs[0].as_str());
                let (q, f, sc) = (format!("{out}__q"), format!("{out}__f"), format!("{out}__s"));
                let mut gq = n.clone();
                gq.inputs = vec![w.clone(), ids.to_owned()];
                gq.outputs = vec![q.clone()];
                let mut gs = n.clone();
                gs.inputs = vec![s.clone(), ids.to_owned()];
                gs.outputs = vec![sc.clone()];
                gs.name = format!("{}__scale", n.name);
                let mut cast = nodes[c].clone();
                cast.inputs = vec![q.clone()];
                cast.outputs = vec![f.clone()];
                let mut mul = nodes[m].clone();
                mul.inputs = vec![f, sc];
                mul.outputs = vec![out.to_owned()];
                replace.insert(i, vec![gq, gs, cast, mul]);
                drop.extend([c, m]);
            }
            _ => {}
        }
    }
    if replace.is_empty() {
        return None;
    }
    // The graph: every field but the nodes as it was, then the nodes in order (a
    // rewritten node where its original stood), then the new initializers.
    let mut g = Vec::with_capacity(graph_field.payload.len() + 1024);
    for f in &graph {
        if f.num != 1 {
            g.extend_from_slice(f.raw);
        }
    }
    for (i, n) in nodes.iter().enumerate() {
        if drop.contains(&i) {
            continue;
        }
        match replace.get(&i) {
            Some(list) => list.iter().for_each(|r| put_bytes(&mut g, 1, &r.encode())),
            None => put_bytes(&mut g, 1, &n.encode()),
        }
    }
    for t in &new_inits {
        put_bytes(&mut g, 5, t);
    }
    let mut out = Vec::with_capacity(model.len() + 1024);
    let mut has_ms = false;
    for f in &top {
        match f.num {
            7 => put_bytes(&mut out, 7, &g),
            8 => {
                has_ms |= fields(f.payload)?.iter().any(|o| o.num == 1 && o.payload == MS.as_bytes());
                out.extend_from_slice(f.raw);
            }
            _ => out.extend_from_slice(f.raw),
        }
    }
    if !has_ms {
        let mut op = Vec::new();
        put_bytes(&mut op, 1, MS.as_bytes());
        put_varint(&mut op, 2 << 3);
        put_varint(&mut op, 1);
        put_bytes(&mut out, 8, &op);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_format_round_trips_and_bad_bytes_are_none() {
        let mut b = Vec::new();
        put_bytes(&mut b, 3, b"name");
        put_varint(&mut b, 2 << 3);
        put_varint(&mut b, 300);
        let f = fields(&b).unwrap();
        assert_eq!((f[0].num, f[0].payload), (3, &b"name"[..]));
        assert_eq!((f[1].num, f[1].value), (2, 300));
        assert!(fields(&[0x0a, 0x05, 1]).is_none(), "a length past the end");
        assert!(rewrite(b"not a model").is_none());
        let n = Node::new("MatMul", "", &["x", "w"], &["y"], "m".into());
        let back = Node::parse(&n.encode()).unwrap();
        assert_eq!((back.inputs, back.outputs, back.op, back.name), (n.inputs, n.outputs, n.op, n.name));
    }
}
