// Communicator's collective and point-to-point methods for Python (dtrain._core).
// Each method exports its buffers (no copy), checks their sizes and types against each other
// on the caller's thread, then runs dtrain's collective with the GIL released — at once, or
// on the communicator's progress thread when async_op=True (returning a Handle).
#include <pybind11/stl.h>

#include "base/error.h"
#include "coll/collectives.h"
#include "core_comm.h"

namespace dtrain::py {

namespace {

using pyb::arg;

template <class O>
O options(const std::string& algorithm) {
  O o;
  o.algorithm = parse_algorithm(algorithm);
  return o;
}

void same_kind(const BufView& a, const BufView& b, size_t factor_b, const char* call) {
  DT_CHECK(a.elem() == b.elem(), InvalidArgument,
           call << ": buffers differ in type (" << elem_name(a.elem()) << " and " << elem_name(b.elem()) << ")");
  DT_CHECK(a.count() * factor_b == b.count(), InvalidArgument,
           call << ": the second buffer must hold " << factor_b << " x " << a.count() << " elements (got "
                << b.count() << ")");
}

BufPtr view(pyb::handle h, bool writable, const char* what) { return std::make_shared<BufView>(h, writable, what); }

int source_rank(pyb::handle source) { return source.is_none() ? kAnySource : source.cast<int>(); }

const char* kAsyncDoc = "\n\nasync_op=True returns a Handle at once (the call runs on the progress thread; keep\n"
                        "the buffers untouched until Handle.wait() returns); otherwise returns None.";

}  // namespace

void bind_collectives(pyb::class_<PyComm, std::shared_ptr<PyComm>>& cls) {
  cls.def(
      "allreduce",
      [](PyComm& c, pyb::object buf, const std::string& op, pyb::object out, const std::string& algorithm,
         bool async_op) {
        RedOp r = parse_red_op(op);
        BufPtr in = view(buf, out.is_none(), "allreduce");
        BufPtr o = out.is_none() ? in : view(out, true, "allreduce out");
        same_kind(*in, *o, 1, "allreduce");
        auto opts = options<AllreduceOptions>(algorithm);
        return c.run("allreduce", async_op, {in, o}, [in, o, r, opts](Communicator& cm) {
          allreduce_ext(cm, in->data(), o->data(), in->count(), in->elem(), r, opts);
        });
      },
      arg("buf"), arg("op") = "sum", arg("out") = pyb::none(), arg("algorithm") = "auto", arg("async_op") = false,
      (std::string(R"(All-reduce: every rank gets the reduction of every rank's `buf`.

Parameters
----------
buf : array_like (buffer protocol, C-contiguous)
    This rank's contribution; the result replaces it unless `out` is given.
op : {"sum", "avg", "prod", "min", "max", "band", "bor", "bxor"}
    Reduction (bitwise ops on integer and bool arrays only).
out : array_like, optional
    Where the result goes (same size and type as `buf`).
algorithm : str
    "auto" (the cost model picks), or "ring", "tree", "butterfly", "naive", ... (see
    ``plan_collective``).
async_op : bool

Examples
--------
>>> x = numpy.full(4, comm.rank, dtype=numpy.float32)
>>> comm.allreduce(x)          # x == 0 + 1 + ... + (size-1) on every rank
)") + kAsyncDoc).c_str());

  cls.def(
      "broadcast",
      [](PyComm& c, pyb::object buf, int root, bool async_op) {
        BufPtr b = view(buf, true, "broadcast");
        return c.run("broadcast", async_op, {b}, [b, root](Communicator& cm) {
          dtrain::broadcast(cm, b->data(), b->bytes(), DType::kUInt8, root);
        });
      },
      arg("buf"), arg("root") = 0, arg("async_op") = false,
      (std::string("Broadcast: every rank's `buf` receives the root's `buf`.") + kAsyncDoc).c_str());

  cls.def(
      "reduce",
      [](PyComm& c, pyb::object buf, int root, const std::string& op, pyb::object out, bool async_op) {
        RedOp r = parse_red_op(op);
        const bool me = c.comm().rank() == root;
        BufPtr in = view(buf, me && out.is_none(), "reduce");
        BufPtr o = me ? (out.is_none() ? in : view(out, true, "reduce out")) : nullptr;
        if (o) same_kind(*in, *o, 1, "reduce");
        return c.run("reduce", async_op, {in, o}, [in, o, r, root](Communicator& cm) {
          reduce_ext(cm, in->data(), o ? o->data() : nullptr, in->count(), in->elem(), r, root);
        });
      },
      arg("buf"), arg("root") = 0, arg("op") = "sum", arg("out") = pyb::none(), arg("async_op") = false,
      (std::string("Reduce to `root`: the root's `buf` (or `out`) receives the reduction; other ranks' "
                   "buffers are unchanged.") + kAsyncDoc).c_str());

  cls.def(
      "allgather",
      [](PyComm& c, pyb::object send, pyb::object recv, bool async_op) {
        BufPtr s = view(send, false, "allgather"), r = view(recv, true, "allgather recv");
        same_kind(*s, *r, c.comm().size(), "allgather");
        return c.run("allgather", async_op, {s, r}, [s, r](Communicator& cm) {
          dtrain::allgather(cm, s->data(), r->data(), s->bytes(), DType::kUInt8);
        });
      },
      arg("send"), arg("recv"), arg("async_op") = false,
      (std::string("All-gather: `recv` (size x len(send) elements) receives every rank's `send` in rank order.") +
       kAsyncDoc).c_str());

  cls.def(
      "reduce_scatter",
      [](PyComm& c, pyb::object send, pyb::object recv, const std::string& op, bool async_op) {
        RedOp rop = parse_red_op(op);
        BufPtr s = view(send, false, "reduce_scatter"), r = view(recv, true, "reduce_scatter recv");
        same_kind(*r, *s, c.comm().size(), "reduce_scatter");
        return c.run("reduce_scatter", async_op, {s, r}, [s, r, rop](Communicator& cm) {
          reduce_scatter_ext(cm, s->data(), r->data(), r->count(), r->elem(), rop);
        });
      },
      arg("send"), arg("recv"), arg("op") = "sum", arg("async_op") = false,
      (std::string("Reduce-scatter: rank r's `recv` receives the reduction of block r of every rank's `send` "
                   "(size x len(recv) elements).") + kAsyncDoc).c_str());

  cls.def(
      "gather",
      [](PyComm& c, pyb::object send, pyb::object recv, int root, bool async_op) {
        const bool me = c.comm().rank() == root;
        BufPtr s = view(send, false, "gather");
        BufPtr r = me ? view(recv, true, "gather recv") : nullptr;
        if (r) same_kind(*s, *r, c.comm().size(), "gather");
        return c.run("gather", async_op, {s, r}, [s, r, root](Communicator& cm) {
          dtrain::gather(cm, s->data(), r ? r->data() : nullptr, s->bytes(), DType::kUInt8, root);
        });
      },
      arg("send"), arg("recv") = pyb::none(), arg("root") = 0, arg("async_op") = false,
      (std::string("Gather to `root`: the root's `recv` (size x len(send)) receives every rank's `send`.") +
       kAsyncDoc).c_str());

  cls.def(
      "scatter",
      [](PyComm& c, pyb::object send, pyb::object recv, int root, bool async_op) {
        const bool me = c.comm().rank() == root;
        BufPtr r = view(recv, true, "scatter recv");
        BufPtr s = me ? view(send, false, "scatter") : nullptr;
        if (s) same_kind(*r, *s, c.comm().size(), "scatter");
        return c.run("scatter", async_op, {s, r}, [s, r, root](Communicator& cm) {
          dtrain::scatter(cm, s ? s->data() : nullptr, r->data(), r->bytes(), DType::kUInt8, root);
        });
      },
      arg("send"), arg("recv"), arg("root") = 0, arg("async_op") = false,
      (std::string("Scatter from `root`: rank r's `recv` receives block r of the root's `send`.") + kAsyncDoc).c_str());

  cls.def(
      "alltoall",
      [](PyComm& c, pyb::object send, pyb::object recv, bool async_op) {
        BufPtr s = view(send, false, "alltoall"), r = view(recv, true, "alltoall recv");
        same_kind(*s, *r, 1, "alltoall");
        DT_CHECK(s->count() % c.comm().size() == 0, InvalidArgument,
                 "alltoall: " << s->count() << " elements do not split into " << c.comm().size() << " blocks");
        return c.run("alltoall", async_op, {s, r}, [s, r](Communicator& cm) {
          dtrain::alltoall(cm, s->data(), r->data(), s->bytes() / cm.size(), DType::kUInt8);
        });
      },
      arg("send"), arg("recv"), arg("async_op") = false,
      (std::string("All-to-all: block q of `send` goes to rank q; block q of `recv` comes from rank q.") +
       kAsyncDoc).c_str());

  cls.def(
      "barrier",
      [](PyComm& c, bool async_op) {
        return c.run("barrier", async_op, {}, [](Communicator& cm) { dtrain::barrier(cm); });
      },
      arg("async_op") = false, (std::string("Barrier: returns once every rank entered it.") + kAsyncDoc).c_str());

  cls.def(
      "send",
      [](PyComm& c, pyb::object buf, int dest, uint32_t tag) {
        BufPtr b = view(buf, false, "send");
        pyb::gil_scoped_release nogil;
        c.comm().send(dest, b->data(), b->bytes(), tag);
      },
      arg("buf"), arg("dest"), arg("tag") = 0, "Send `buf` to rank `dest` (blocks until it left).");
  cls.def(
      "recv",
      [](PyComm& c, pyb::object buf, pyb::object source, uint32_t tag) {
        BufPtr b = view(buf, true, "recv");
        int src = source_rank(source);
        pyb::gil_scoped_release nogil;
        return c.comm().recv(src, b->data(), b->bytes(), tag);
      },
      arg("buf"), arg("source") = pyb::none(), arg("tag") = 0,
      R"(Receive a message into `buf`.

Parameters
----------
buf : array_like (buffer protocol, C-contiguous, writable)
    Receives the message, which must have exactly buf's size in bytes.
source : int or None, optional
    The rank to receive from. None (the default) takes the next message with `tag` from
    any rank, this one included: one already waiting (the earliest to have arrived), else the
    first to come.
tag : int, optional
    Matches the sender's tag (0 <= tag < 2**32).

Returns
-------
int
    The rank the message came from.

Raises
------
dtrain.PeerFailure
    The sender died (with source=None: any rank died while waiting, named in the message).
dtrain.Timeout
    No message with `tag` came within the communicator's timeout.
dtrain.InvalidArgument
    The message's size differs from buf's (both named).
)");
  cls.def(
      "probe",
      [](PyComm& c, uint32_t tag) -> pyb::object {
        ProbeResult r;
        {
          pyb::gil_scoped_release nogil;
          r = c.comm().probe(tag);
        }
        if (!r.found()) return pyb::none();
        return pyb::make_tuple(r.source, r.bytes);
      },
      arg("tag") = 0,
      R"(Check, without blocking, for a message with `tag` that has arrived but not been received.

Returns
-------
tuple of (int, int) or None
    (source, nbytes) of the earliest such message, or None. The next ``recv`` from that
    source (or from any source) takes it, unless another thread receives it first.
)");
  cls.def(
      "isend",
      [](PyComm& c, pyb::object buf, int dest, uint32_t tag) {
        BufPtr b = view(buf, false, "isend");
        Request r = c.comm().isend(dest, b->data(), b->bytes(), tag);
        return std::make_shared<Handle>("isend", std::move(r), std::vector<BufPtr>{b}, c.comm().timeout());
      },
      arg("buf"), arg("dest"), arg("tag") = 0, "Start sending `buf` to `dest`; returns a Handle.");
  cls.def(
      "irecv",
      [](PyComm& c, pyb::object buf, pyb::object source, uint32_t tag) {
        BufPtr b = view(buf, true, "irecv");
        Request r = c.comm().irecv(source_rank(source), b->data(), b->bytes(), tag);
        return std::make_shared<Handle>("irecv", std::move(r), std::vector<BufPtr>{b}, c.comm().timeout());
      },
      arg("buf"), arg("source") = pyb::none(), arg("tag") = 0,
      "Start receiving into `buf` from `source` (None: from any rank, see recv); returns a Handle\n"
      "whose `source` is the sender's rank once wait() returned.");
}

}  // namespace dtrain::py
