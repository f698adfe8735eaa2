//! A frame decoded whole: in one call into libzstd when it is well formed, else by the same
//! streaming decoder as on the reading thread, so that it gives the same bytes before its fault
//! and the same fault wherever it is decoded.

use std::cell::RefCell;
use std::io;

use zstd::stream::raw::{Decoder, Operation};

use super::inline::{Inline, STREAM_PIECE};
use crate::archive::frames::{Fault, FrameHeader};

/// What a frame decoded whole gives: its bytes, then its fault if any.
pub(crate) struct Decoded {
    pub data: Vec<u8>,
    pub fault: Option<Fault>,
}

/// Decodes a whole frame at once with this thread's contexts (see [`Contexts::decode`]), into
/// `out` (emptied first, its capacity reused).
pub(crate) fn decode_whole(
    bytes: &[u8],
    out: Vec<u8>,
    header: &FrameHeader,
    max_window_log: u32,
    limit: u64,
) -> Decoded {
    thread_local! {
        static CONTEXTS: RefCell<Option<Contexts>> = const { RefCell::new(None) };
    }
    CONTEXTS.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            match Contexts::new(max_window_log) {
                Ok(c) => *cell = Some(c),
                Err(e) => return Decoded { data: out, fault: Some(Fault::Io(e)) },
            }
        }
        cell.as_mut().expect("set above").decode(bytes, out, header, limit)
    })
}

/// The libzstd contexts a frame decoded whole needs: one-shot, and streaming for a frame that
/// fails.
pub(crate) struct Contexts {
    bulk: zstd::bulk::Decompressor<'static>,
    stream: Decoder<'static>,
}

impl Contexts {
    pub fn new(max_window_log: u32) -> io::Result<Self> {
        let window = zstd::zstd_safe::DParameter::WindowLogMax(max_window_log);
        let mut bulk = zstd::bulk::Decompressor::new()?;
        bulk.set_parameter(window)?;
        let mut stream = Decoder::new()?;
        stream.set_parameter(window)?;
        Ok(Contexts { bulk, stream })
    }

    /// Decodes a whole frame into `out` (emptied first): one call into libzstd when the frame is
    /// well formed, else the streaming decoder's bytes up to its fault, then the fault.
    ///
    /// A frame without a content size (or declaring more than `limit`) is decoded by the
    /// streaming decoder only, and stops with a fault once it gives more than `limit` bytes.
    pub fn decode(&mut self, bytes: &[u8], mut out: Vec<u8>, header: &FrameHeader, limit: u64) -> Decoded {
        out.clear();
        let size = header.content_size.filter(|&n| n <= limit).unwrap_or(0) as usize;
        out.reserve(size);
        if decode_at_once(&mut self.bulk, bytes, &mut out, header, limit) {
            return Decoded { data: out, fault: None };
        }
        // The same streaming decoder as on the reading thread, for the same bytes and fault.
        let mut inline = Inline::new(bytes.to_vec(), header, None);
        let mut piece = vec![0u8; STREAM_PIECE];
        out.reserve(size);
        if let Err(e) = self.stream.reinit() {
            return Decoded { data: out, fault: Some(Fault::Io(e)) };
        }
        loop {
            match inline.read(&mut self.stream, None, &mut io::empty(), &mut piece) {
                Ok(0) => return Decoded { data: out, fault: None },
                Ok(n) if (out.len() + n) as u64 > limit => {
                    let reason = format!("the zstd frame decodes to more than {limit} bytes");
                    return Decoded { data: out, fault: Some(Fault::Malformed(reason)) };
                }
                Ok(n) => out.extend_from_slice(&piece[..n]),
                Err(fault) => return Decoded { data: out, fault: Some(fault) },
            }
        }
    }
}

/// Decodes a well-formed frame of known content size (at most `limit`) in one call into `out`
/// (empty, with room for the content, so that nothing is allocated): `true` when it gave
/// exactly that content; `false` (and `out` empty) for any other frame.
pub(crate) fn decode_at_once(
    bulk: &mut zstd::bulk::Decompressor<'static>,
    bytes: &[u8],
    out: &mut Vec<u8>,
    header: &FrameHeader,
    limit: u64,
) -> bool {
    let Some(size) = header.content_size.filter(|&n| n <= limit) else { return false };
    let whole = zstd::zstd_safe::find_frame_compressed_size(bytes) == Ok(bytes.len());
    if whole && out.capacity() >= size as usize && bulk.decompress_to_buffer(bytes, out).is_ok_and(|n| n as u64 == size)
    {
        return true;
    }
    out.clear();
    false
}
