//! Splitting file content into objects, and the `file` object that lists the chunks.
//!
//! Content of at most [`CHUNK_THRESHOLD`] bytes is one blob whose id is the content id. Larger
//! content is cut by FastCDC v2020 (min 256 KiB, average 1 MiB, max 4 MiB): chunk boundaries
//! depend only on the bytes around them, so an edit in the middle of a large file changes only
//! the chunks it touches and the rest deduplicate against the previous version. The chunks are
//! blobs, and a `file` object lists them; its id is the content id.
//!
//! Everything here streams: one read buffer of `CHUNK_THRESHOLD + 1` bytes (reused per thread,
//! so 100k small files cost no allocation each), the chunker's 4 MiB window and one chunk at a
//! time. A 10 GiB input never sits in memory.
//!
//! `file` object encoding (integers little-endian):
//! `b"RWF1"`, `u64` total size, `u32` chunk count, then per chunk `u32` length and 32-byte blob
//! id, in content order. The lengths let a reader seek without fetching chunks, and the sum of
//! the lengths must equal the total size.

use std::cell::Cell;
use std::io::{self, Read};

use fastcdc::v2020::StreamCDC;

use crate::{Error, ObjectId, ObjectKind, Result, CHUNK_THRESHOLD};

pub(crate) const MIN_CHUNK: u32 = 256 << 10;
pub(crate) const AVG_CHUNK: u32 = 1 << 20;
pub(crate) const MAX_CHUNK: u32 = 4 << 20;

const FILE_MAGIC: &[u8; 4] = b"RWF1";
const FILE_HEADER_LEN: usize = 16;
const FILE_ENTRY_LEN: usize = 36;

/// A decoded `file` object: the content's total size and its chunks in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileObject {
    pub size: u64,
    /// (length, blob id) of each chunk.
    pub chunks: Vec<(u32, ObjectId)>,
}

impl FileObject {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FILE_HEADER_LEN + self.chunks.len() * FILE_ENTRY_LEN);
        out.extend_from_slice(FILE_MAGIC);
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&(self.chunks.len() as u32).to_le_bytes());
        for (len, id) in &self.chunks {
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&id.0);
        }
        out
    }

    pub fn decode(data: &[u8]) -> Result<FileObject, String> {
        let header = data
            .get(..FILE_HEADER_LEN)
            .ok_or("file object: short header")?;
        if &header[..4] != FILE_MAGIC {
            return Err("file object: bad magic".into());
        }
        let size = u64::from_le_bytes(le(&header[4..12]));
        let count = u32::from_le_bytes(le(&header[12..16])) as usize;
        let body = &data[FILE_HEADER_LEN..];
        if body.len() != count.saturating_mul(FILE_ENTRY_LEN) {
            return Err(format!(
                "file object: {} bytes of entries for {count} chunks",
                body.len()
            ));
        }
        let mut chunks = Vec::with_capacity(count);
        let mut sum = 0u64;
        for e in body.chunks_exact(FILE_ENTRY_LEN) {
            let len = u32::from_le_bytes(le(&e[..4]));
            if len == 0 {
                return Err("file object: empty chunk".into());
            }
            sum += u64::from(len);
            chunks.push((len, ObjectId(le(&e[4..]))));
        }
        if sum != size {
            return Err(format!(
                "file object: chunks hold {sum} bytes, total size says {size}"
            ));
        }
        Ok(FileObject { size, chunks })
    }
}

/// A fixed-size array from a slice the caller has already cut to length.
fn le<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0; N];
    a.copy_from_slice(b);
    a
}

/// Where [`split_content`] sends the objects it cuts: the writer stores them, `content_id`
/// only hashes them.
pub(crate) trait ContentSink {
    fn put(&mut self, kind: ObjectKind, data: &[u8]) -> Result<ObjectId>;
}

thread_local! {
    /// The first-read buffer, kept per thread: allocating (and zeroing) 1 MiB per small file
    /// would cost more than hashing it.
    static FIRST_READ: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// Splits `reader`'s bytes into objects handed to `sink`; returns the content id and length.
pub(crate) fn split_content(
    reader: &mut dyn Read,
    sink: &mut dyn ContentSink,
) -> Result<(ObjectId, u64)> {
    let cap = CHUNK_THRESHOLD as usize + 1;
    let mut buf = FIRST_READ.with(Cell::take);
    if buf.len() != cap {
        buf = vec![0; cap];
    }
    let result = split_with(&mut buf, reader, sink);
    FIRST_READ.with(|b| b.set(buf));
    result
}

fn split_with(
    buf: &mut [u8],
    reader: &mut dyn Read,
    sink: &mut dyn ContentSink,
) -> Result<(ObjectId, u64)> {
    // One byte more than the threshold tells "fits in one blob" from "must be chunked".
    let n = read_full(reader, buf).map_err(Error::Input)?;
    if n as u64 <= CHUNK_THRESHOLD {
        let id = sink.put(ObjectKind::Blob, &buf[..n])?;
        return Ok((id, n as u64));
    }
    // The chunker refills its window until full, so cut points do not depend on how the
    // reader splits its reads.
    let source = (&buf[..n]).chain(Retry(reader));
    let cdc = StreamCDC::new(
        source,
        MIN_CHUNK as usize,
        AVG_CHUNK as usize,
        MAX_CHUNK as usize,
    );
    let mut file = FileObject {
        size: 0,
        chunks: Vec::new(),
    };
    for chunk in cdc {
        let chunk = chunk.map_err(|e| Error::Input(e.into()))?;
        let id = sink.put(ObjectKind::Blob, &chunk.data)?;
        file.size += chunk.data.len() as u64;
        file.chunks.push((chunk.data.len() as u32, id));
    }
    let id = sink.put(ObjectKind::File, &file.encode())?;
    Ok((id, file.size))
}

/// Reads until `buf` is full or the reader is exhausted.
fn read_full(reader: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match reader.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Retries reads interrupted by a signal (the chunker would give up on them).
struct Retry<'a>(&'a mut dyn Read);

impl Read for Retry<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.0.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }
}

/// Hashes without storing: the sink behind [`crate::content_id`].
pub(crate) struct HashOnly;

impl ContentSink for HashOnly {
    fn put(&mut self, kind: ObjectKind, data: &[u8]) -> Result<ObjectId> {
        Ok(ObjectId::compute(kind, data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_object_round_trip_and_validation() {
        let f = FileObject {
            size: 5,
            chunks: vec![(2, ObjectId([1; 32])), (3, ObjectId([2; 32]))],
        };
        let enc = f.encode();
        assert_eq!(enc.len(), 16 + 2 * 36);
        assert_eq!(FileObject::decode(&enc).unwrap(), f);
        let mut bad = enc.clone();
        bad[4] = 6; // total size no longer matches the chunks
        assert!(FileObject::decode(&bad).is_err());
        assert!(FileObject::decode(&enc[..enc.len() - 1]).is_err());
        assert!(FileObject::decode(b"RWF0").is_err());
    }
}
