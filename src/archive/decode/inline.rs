//! One frame through libzstd's streaming decoder, for [`FrameStream`](super::FrameStream): a
//! frame too large to read whole, a frame of unknown size, and any frame one call could not
//! decode (so that its bytes before the fault, then the fault, are what the streaming decoder
//! gives, on whatever thread).

use std::io::{self, BufRead};

use zstd::stream::raw::{Decoder, InBuffer, Operation, OutBuffer};

use crate::archive::frames::{self, Fault, FrameHeader, Piece, Walker};

/// Compressed bytes given to the streaming decoder at once, for a frame read while decoded.
pub(super) const STREAM_PIECE: usize = 128 << 10;
/// libzstd's message for `ZSTD_error_frameParameter_windowTooLarge`
/// (`lib/common/error_private.c`); the `zstd` crate only passes on the text.
const WINDOW_TOO_LARGE: &str = "Frame requires too much memory for decoding";

/// One frame through libzstd's streaming decoder: from bytes already read, then (for a frame
/// too large to read whole) from the input through its walker.
///
/// The calls into libzstd depend only on the frame's bytes, never on the caller's buffer sizes
/// or on how the input arrives: compressed bytes are offered one piece of the frame at a time
/// (its header, each block with its block header, its checksum; [`frames::piece_end`]), and
/// each call gets the whole of an empty output buffer of [`STREAM_PIECE`] bytes, as large as a
/// block can decode to. That matters for a damaged frame: libzstd reports nothing of what a
/// failing call wrote, so where a fault falls in the served bytes depends on where the calls
/// fall, which must be the same on one thread and many; with one block per call, the bytes
/// served are exactly those of the blocks before the damage, and a bad checksum comes after
/// all of the frame's bytes.
pub(super) struct Inline {
    in_buf: Vec<u8>,
    in_pos: usize,
    /// Where the piece of compressed bytes being offered ends.
    in_end: usize,
    /// The kind of the next piece of `in_buf` (while it holds the frame from its start).
    piece: Piece,
    header_len: usize,
    /// No more compressed bytes will come.
    src_done: bool,
    /// Why the compressed bytes ended early, served once the bytes before it are.
    src_fault: Option<Fault>,
    out: Vec<u8>,
    out_pos: usize,
    out_len: usize,
    content_size: Option<u64>,
    window: u64,
    pub(super) produced: u64,
    /// libzstd reported the frame's end (its checksum verified).
    finished: bool,
}

impl Inline {
    pub(super) fn new(bytes: Vec<u8>, header: &FrameHeader, fault: Option<Fault>) -> Self {
        Inline {
            in_buf: bytes,
            in_pos: 0,
            in_end: 0,
            piece: Piece::Header,
            header_len: header.len,
            src_done: false,
            src_fault: fault,
            out: vec![0; STREAM_PIECE],
            out_pos: 0,
            out_len: 0,
            content_size: header.content_size,
            window: header.window_size,
            produced: 0,
            finished: false,
        }
    }

    /// Decoded bytes not served yet.
    pub(super) fn pending(&self) -> &[u8] {
        &self.out[self.out_pos..self.out_len]
    }

    pub(super) fn consume(&mut self, n: usize) {
        self.out_pos = (self.out_pos + n).min(self.out_len);
    }

    /// Decoded bytes of the frame into `buf`; `Ok(0)` at its verified end.
    pub(super) fn read<R: BufRead>(
        &mut self,
        dctx: &mut Decoder<'static>,
        walker: Option<&mut Walker>,
        input: &mut R,
        buf: &mut [u8],
    ) -> Result<usize, Fault> {
        if self.out_pos == self.out_len {
            self.fill(dctx, walker, input)?;
        }
        let n = buf.len().min(self.out_len - self.out_pos);
        buf[..n].copy_from_slice(&self.out[self.out_pos..self.out_pos + n]);
        self.out_pos += n;
        Ok(n)
    }

    /// Decodes into the empty output buffer: some bytes, or none at the frame's verified end.
    pub(super) fn fill<R: BufRead>(
        &mut self,
        dctx: &mut Decoder<'static>,
        mut walker: Option<&mut Walker>,
        input: &mut R,
    ) -> Result<(), Fault> {
        self.out_pos = 0;
        self.out_len = 0;
        loop {
            if self.finished {
                return Ok(());
            }
            if self.in_pos == self.in_end && !self.src_done {
                if self.in_end < self.in_buf.len() {
                    (self.in_end, self.piece) =
                        frames::piece_end(&self.in_buf, self.in_pos, self.piece, self.header_len);
                } else {
                    match walker.as_deref_mut() {
                        Some(w) if !w.done() && self.src_fault.is_none() => {
                            self.in_buf.clear();
                            self.in_pos = 0;
                            if let Err(f) = w.read_piece(input, &mut self.in_buf) {
                                self.src_fault = Some(f);
                            }
                            self.in_end = self.in_buf.len();
                            self.piece = Piece::End;
                        }
                        _ => self.src_done = true,
                    }
                }
            }
            let mut inb = InBuffer::around(&self.in_buf[self.in_pos..self.in_end]);
            let mut outb = OutBuffer::around(&mut self.out[..]);
            let window = self.window;
            let hint = dctx.run(&mut inb, &mut outb).map_err(|e| classify(e, window))?;
            let (used, n) = (inb.pos(), outb.pos());
            self.in_pos += used;
            self.produced += n as u64;
            if self.content_size.is_some_and(|size| self.produced > size) {
                return Err(Fault::Malformed("the zstd frame holds more than its Frame_Content_Size".into()));
            }
            if hint == 0 {
                let walked_all = walker.as_deref().is_none_or(Walker::done);
                if self.in_pos < self.in_buf.len() || !walked_all || self.src_fault.is_some() {
                    return Err(Fault::Malformed("the zstd frame ends before its last block".into()));
                }
                self.finished = true;
            }
            if n > 0 {
                self.out_len = n;
                return Ok(());
            }
            if used == 0 && self.in_pos == self.in_buf.len() && self.src_done {
                return Err(self.src_fault.take().unwrap_or(Fault::Truncated));
            }
        }
    }
}

/// The fault for an error of libzstd's decoder.
fn classify(e: io::Error, window: u64) -> Fault {
    if e.to_string() == WINDOW_TOO_LARGE {
        return Fault::Window(window);
    }
    Fault::Malformed(format!("zstd decoding failed: {e}"))
}
