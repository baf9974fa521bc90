//! Linux errno values as the guest sees them.

/// A Linux error number (positive; the guest receives `-errno`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

macro_rules! errnos {
    ($($name:ident = $v:expr),* $(,)?) => {
        impl Errno {
            $(#[allow(missing_docs)] pub const $name: Errno = Errno($v);)*
            /// The symbolic name, for traces.
            pub fn name(self) -> &'static str {
                match self.0 {
                    $($v => stringify!($name),)*
                    _ => "E?",
                }
            }
        }
    };
}

errnos! {
    EPERM = 1, ENOENT = 2, ESRCH = 3, EINTR = 4, EIO = 5, ENXIO = 6, E2BIG = 7,
    ENOEXEC = 8, EBADF = 9, ECHILD = 10, EAGAIN = 11, ENOMEM = 12, EACCES = 13,
    EFAULT = 14, EBUSY = 16, EEXIST = 17, EXDEV = 18, ENODEV = 19, ENOTDIR = 20,
    EISDIR = 21, EINVAL = 22, ENFILE = 23, EMFILE = 24, ENOTTY = 25, EFBIG = 27,
    ENOSPC = 28, ESPIPE = 29, EROFS = 30, EMLINK = 31, EPIPE = 32, EDOM = 33,
    ERANGE = 34, EDEADLK = 35, ENAMETOOLONG = 36, ENOLCK = 37, ENOSYS = 38,
    ENOTEMPTY = 39, ELOOP = 40, EIDRM = 43, ENODATA = 61, EOVERFLOW = 75, EOPNOTSUPP = 95,
    ETIMEDOUT = 110, ENOTSOCK = 88,
    // Sockets.
    EMSGSIZE = 90, ENOPROTOOPT = 92, EPROTONOSUPPORT = 93, ESOCKTNOSUPPORT = 94,
    ENOBUFS = 105, EISCONN = 106, ENOTCONN = 107, ECONNREFUSED = 111,
}

impl From<std::io::Error> for Errno {
    fn from(e: std::io::Error) -> Self {
        Errno(e.raw_os_error().unwrap_or(5))
    }
}

impl From<rustix::io::Errno> for Errno {
    fn from(e: rustix::io::Errno) -> Self {
        Errno(e.raw_os_error())
    }
}
