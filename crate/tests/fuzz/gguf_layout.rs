//! Where every numeric field of a GGUF file sits, so mutations can aim at counts, lengths, dims
//! and offsets instead of hoping a random byte flip lands on one.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    Count,
    StrLen,
    ValueType,
    ArrayLen,
    Scalar,
    NDims,
    Dim,
    DType,
    TensorOffset,
}

pub const FIELD_KINDS: &[FieldKind] = &[
    FieldKind::Count,
    FieldKind::StrLen,
    FieldKind::ValueType,
    FieldKind::ArrayLen,
    FieldKind::Scalar,
    FieldKind::NDims,
    FieldKind::Dim,
    FieldKind::DType,
    FieldKind::TensorOffset,
];

#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub at: usize,
    pub width: usize,
    pub kind: FieldKind,
}

/// Every numeric field of a (valid, version 2/3) GGUF file, and where the tensor data starts.
pub struct GgufLayout {
    pub fields: Vec<Field>,
    pub data_start: usize,
}

pub fn read_uint(b: &[u8], f: &Field) -> u64 {
    let mut v = [0u8; 8];
    v[..f.width].copy_from_slice(&b[f.at..f.at + f.width]);
    u64::from_le_bytes(v)
}

/// Mutations can shorten the file before the field, which then just stays missing.
pub fn write_uint(b: &mut [u8], f: &Field, v: u64) {
    if f.at + f.width <= b.len() {
        b[f.at..f.at + f.width].copy_from_slice(&v.to_le_bytes()[..f.width]);
    }
}

/// A cursor over the file that records each field it steps over.
struct Walker<'a> {
    b: &'a [u8],
    p: usize,
    fields: Vec<Field>,
}

impl Walker<'_> {
    fn field(&mut self, width: usize, kind: FieldKind) -> u64 {
        let f = Field { at: self.p, width, kind };
        self.fields.push(f);
        self.p += width;
        read_uint(self.b, &f)
    }

    fn string(&mut self) {
        let len = self.field(8, FieldKind::StrLen) as usize;
        self.p += len;
    }

    fn value(&mut self, ty: u64) {
        match ty {
            0 | 1 | 7 => {
                self.field(1, FieldKind::Scalar);
            }
            2 | 3 => {
                self.field(2, FieldKind::Scalar);
            }
            4..=6 => {
                self.field(4, FieldKind::Scalar);
            }
            10..=12 => {
                self.field(8, FieldKind::Scalar);
            }
            8 => self.string(),
            9 => {
                let elem = self.field(4, FieldKind::ValueType);
                let n = self.field(8, FieldKind::ArrayLen);
                for _ in 0..n {
                    self.value(elem);
                }
            }
            other => panic!("unexpected GGUF value type {other}"),
        }
    }
}

pub fn walk_gguf(b: &[u8]) -> GgufLayout {
    // The magic is not a number; the version is the first field.
    let mut w = Walker { b, p: 4, fields: Vec::new() };
    w.field(4, FieldKind::Scalar);
    let n_tensors = w.field(8, FieldKind::Count);
    let n_kv = w.field(8, FieldKind::Count);
    for _ in 0..n_kv {
        w.string();
        let ty = w.field(4, FieldKind::ValueType);
        w.value(ty);
    }
    for _ in 0..n_tensors {
        w.string();
        let n_dims = w.field(4, FieldKind::NDims);
        for _ in 0..n_dims {
            w.field(8, FieldKind::Dim);
        }
        w.field(4, FieldKind::DType);
        w.field(8, FieldKind::TensorOffset);
    }
    GgufLayout { fields: w.fields, data_start: w.p.div_ceil(32) * 32 }
}
