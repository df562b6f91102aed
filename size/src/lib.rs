//! A minimal `no_std` program with imp's TCP: one exported function that opens a
//! connection to itself over the loopback interface, moves one letter and closes.
//! Built as a `cdylib` so the linker keeps only what that function reaches; the size
//! of its `.text` is the size of a TCP/IP stack an embedded user would link (see
//! README.md for the method). The allocator is a bump allocator over a static arena:
//! enough for one demonstration call, and no code of its own to speak of.
#![no_std]

extern crate alloc;

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::net::{Ipv4Addr, SocketAddrV4};
use core::sync::atomic::{AtomicUsize, Ordering};

use impnet_core::{Instant, Secret, Stack, StackConfig};

const ARENA: usize = 4 << 20;

struct Bump {
    arena: UnsafeCell<[u8; ARENA]>,
    next: AtomicUsize,
}

// SAFETY: `next` hands out disjoint ranges of the arena; nothing is ever reused.
unsafe impl Sync for Bump {}

// SAFETY: every block is within the arena, aligned as asked, and never handed out twice.
unsafe impl GlobalAlloc for Bump {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let base = self.arena.get() as usize;
        let mut start = 0;
        let claimed = self
            .next
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |next| {
                start = (base + next).next_multiple_of(layout.align()) - base;
                let end = start.checked_add(layout.size())?;
                (end <= ARENA).then_some(end)
            });
        match claimed {
            Ok(_) => (base + start) as *mut u8,
            Err(_) => core::ptr::null_mut(),
        }
    }

    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: Layout) {}
}

#[global_allocator]
static ALLOC: Bump = Bump {
    arena: UnsafeCell::new([0; ARENA]),
    next: AtomicUsize::new(0),
};

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    loop {}
}

/// Open a connection to 127.0.0.1:7 from itself, send `letter` bytes, read them back,
/// close; the bytes read back. `seed` keys the stack (a real one takes it from the
/// hardware's random source).
#[unsafe(no_mangle)]
pub extern "C" fn imp_tcp_letter(seed: u64, letter: usize) -> usize {
    let mut key = [0u8; Secret::LEN];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    let mut stack = Stack::new(StackConfig::default(), Secret::from_bytes(key));
    let now = Instant::ZERO;
    let me = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 7);
    let Ok(conn) = stack.tcp_connect(now, me, me) else {
        return 0;
    };
    let mut frame = [0u8; 1514];
    let data = [0x5a; 1024];
    let sent = stack
        .tcp_send(now, conn, &data[..letter.min(data.len())])
        .unwrap_or(0);
    while stack.poll_transmit(now, &mut frame).is_some() {}
    let mut back = [0u8; 1024];
    let got = stack.tcp_recv(now, conn, &mut back).unwrap_or(0);
    let _ = stack.tcp_close(now, conn);
    while stack.poll_transmit(now, &mut frame).is_some() {}
    if got == sent { got } else { 0 }
}
