#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstring>
#include <thread>

#include "base/clock.h"
#include "base/error.h"
#include "support/world.h"

namespace dtrain {
namespace {

using testing::pattern_byte;
using testing::run_world;

std::vector<unsigned char> pattern(int from, int to, uint64_t tag, size_t n) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = pattern_byte(from, to, tag, i);
  return v;
}

class TransportTest : public ::testing::TestWithParam<TransportKind> {};

// Every rank exchanges messages of awkward sizes with every other rank at once.
TEST_P(TransportTest, AllPairsAwkwardSizes) {
  for (int n : {2, 3, 5}) {
    run_world(n, GetParam(), [&](Communicator& c) {
      EXPECT_STREQ(c.transport().kind(), GetParam() == TransportKind::kShm ? "shm" : "tcp");
      for (size_t bytes : {size_t{0}, size_t{1}, size_t{7}, size_t{4095}, size_t{4097}, size_t{65537}, size_t{1000003}}) {
        std::vector<std::vector<unsigned char>> out(n), in(n);
        std::vector<Request> reqs;
        for (int p = 0; p < n; ++p) {
          out[p] = pattern(c.rank(), p, bytes, bytes);
          in[p].assign(bytes, 0);
          reqs.push_back(c.irecv(p, in[p].data(), bytes, 3));
          reqs.push_back(c.isend(p, out[p].data(), bytes, 3));
        }
        Transport::wait_all(reqs);
        for (int p = 0; p < n; ++p) ASSERT_EQ(in[p], pattern(p, c.rank(), bytes, bytes)) << "from " << p << " size " << bytes;
      }
    });
  }
}

TEST_P(TransportTest, LargeMessage64MiB) {
  run_world(2, GetParam(), [&](Communicator& c) {
    const size_t bytes = 64u << 20;
    std::vector<unsigned char> buf(bytes);
    if (c.rank() == 0) {
      for (size_t i = 0; i < bytes; ++i) buf[i] = static_cast<unsigned char>(i * 131 + (i >> 20));
      c.send(1, buf.data(), bytes, 9);
    } else {
      c.recv(0, buf.data(), bytes, 9);
      for (size_t i = 0; i < bytes; i += 4093) ASSERT_EQ(buf[i], static_cast<unsigned char>(i * 131 + (i >> 20)));
      EXPECT_EQ(buf[bytes - 1], static_cast<unsigned char>((bytes - 1) * 131 + ((bytes - 1) >> 20)));
    }
  });
}

// Large payloads sent from every offset of a cache line (and past a page), over tcp each
// padded in the stream to its address modulo 64 (transport.cc kPadShift), arrive intact into
// receive buffers at other offsets, posted before or after the message came, and the small
// message behind each one still reads right: the pad is consumed exactly.
TEST_P(TransportTest, LargePayloadsAtEveryAlignmentKeepTheStreamInStep) {
  run_world(2, GetParam(), [&](Communicator& c) {
    const std::vector<size_t> offsets{0, 1, 15, 16, 17, 47, 48, 63, 64, 100, 4095, 4096};
    const std::vector<size_t> sizes{4097, 70001, 1u << 20};
    std::vector<unsigned char> arena((1u << 20) + 8192 + 64);
    uint64_t tag = 100;
    for (size_t size : sizes) {
      for (size_t off : offsets) {
        ++tag;
        const std::vector<unsigned char> want = pattern(0, 1, tag, size);
        if (c.rank() == 0) {
          std::memcpy(arena.data() + off, want.data(), size);
          const uint32_t after = static_cast<uint32_t>(tag * 2654435761u);
          Request big = c.isend(1, arena.data() + off, size, tag);
          Request small = c.isend(1, &after, sizeof after, tag + 100000);
          big.wait();
          small.wait();
          int ok = 0;
          c.recv(1, &ok, sizeof ok, tag + 200000);  // the receiver is done with this pair
          ASSERT_EQ(ok, 1);
        } else {
          const size_t at = (off * 7 + 3) % 64;
          uint32_t after = 0;
          Request small, big;
          if (tag % 2) {  // posted before the message comes
            big = c.irecv(0, arena.data() + at, size, tag);
            small = c.irecv(0, &after, sizeof after, tag + 100000);
          } else {  // the large one arrives unexpected, behind nothing posted
            small = c.irecv(0, &after, sizeof after, tag + 100000);
            small.wait();
            big = c.irecv(0, arena.data() + at, size, tag);
          }
          big.wait();
          small.wait();
          const bool same = std::memcmp(arena.data() + at, want.data(), size) == 0;
          EXPECT_TRUE(same) << "size " << size << " sent from offset " << off << " into offset " << at;
          EXPECT_EQ(after, static_cast<uint32_t>(tag * 2654435761u)) << "size " << size << " offset " << off;
          int ok = same ? 1 : 0;
          c.send(0, &ok, sizeof ok, tag + 200000);
        }
      }
    }
  });
}

// Messages of one tag arrive in order; receives of other tags posted in another order still
// match the right messages (early ones are buffered).
TEST_P(TransportTest, TagsInterleavedAndOrderedPerTag) {
  run_world(2, GetParam(), [&](Communicator& c) {
    const int tags = 6, per_tag = 20;
    if (c.rank() == 0) {
      std::vector<std::vector<int>> msgs;
      std::vector<Request> reqs;
      msgs.reserve(tags * per_tag);
      for (int i = 0; i < per_tag; ++i)
        for (int t = 0; t < tags; ++t) {
          msgs.push_back(std::vector<int>(100 + t * 1000, t * 1000 + i));
          reqs.push_back(c.isend(1, msgs.back().data(), msgs.back().size() * sizeof(int), t));
        }
      Transport::wait_all(reqs);
    } else {
      for (int t = tags - 1; t >= 0; --t)  // reverse tag order: everything else gets buffered
        for (int i = 0; i < per_tag; ++i) {
          std::vector<int> got(100 + t * 1000);
          c.recv(0, got.data(), got.size() * sizeof(int), t);
          ASSERT_EQ(got.front(), t * 1000 + i);
          ASSERT_EQ(got.back(), t * 1000 + i);
        }
    }
  });
}

// Deferred sends wait in the queue until the next send to that peer or a wait; small
// messages queued back to back leave in batched writes (more than one batch's worth here,
// with a large message in the middle that must not be batched). All arrive, in order.
TEST_P(TransportTest, DeferredAndBatchedSmallSendsArriveInOrder) {
  run_world(2, GetParam(), [&](Communicator& c) {
    const int n = 300;
    auto size_of = [](int i) { return static_cast<size_t>(i == 150 ? 300000 : (i * 37) % 500); };
    Transport& t = c.transport();
    if (c.rank() == 0) {
      std::vector<std::vector<unsigned char>> msgs;
      std::vector<Request> reqs;
      for (int i = 0; i < n; ++i) {
        msgs.push_back(pattern(0, 1, static_cast<uint64_t>(i), size_of(i)));
        reqs.push_back(t.isend(1, 9, msgs.back().data(), msgs.back().size(), /*defer=*/i % 3 != 2));
      }
      Transport::wait_all(reqs);
    } else {
      for (int i = 0; i < n; ++i) {
        std::vector<unsigned char> got(size_of(i));
        t.recv(0, 9, got.data(), got.size());
        ASSERT_EQ(got, pattern(0, 1, static_cast<uint64_t>(i), size_of(i))) << "message " << i;
      }
    }
  });
}

// A deferred message with no send after it still leaves once its sender waits on anything
// (here a receive the peer answers only after getting the deferred message).
TEST_P(TransportTest, DeferredSendLeavesWhenTheSenderWaits) {
  run_world(2, GetParam(), [&](Communicator& c) {
    Transport& t = c.transport();
    int v = 41, reply = 0;
    if (c.rank() == 0) {
      Request r = t.isend(1, 5, &v, sizeof v, /*defer=*/true);
      t.irecv(1, 6, &reply, sizeof reply).wait(20);
      r.wait(20);
      EXPECT_EQ(reply, 42);
    } else {
      int got = 0;
      t.irecv(0, 5, &got, sizeof got).wait(20);
      got += 1;
      t.isend(0, 6, &got, sizeof got).wait(20);
    }
  });
}

// A receive posted while its message is partly buffered as unexpected takes the stream over;
// the bytes must come out right either way.
TEST_P(TransportTest, ReceivePostedMidArrival) {
  run_world(2, GetParam(), [&](Communicator& c) {
    const size_t bytes = 8u << 20;
    std::vector<unsigned char> big = pattern(0, 1, 1, bytes);
    if (c.rank() == 0) {
      int small = 5;
      Request a = c.isend(1, big.data(), bytes, 1);
      Request b = c.isend(1, &small, sizeof small, 2);
      a.wait();
      b.wait();
    } else {
      int small = 0;
      Request other = c.irecv(0, &small, sizeof small, 2);
      for (int i = 0; i < 50 && !other.test(); ++i) {  // pull part of tag 1 into the buffer
      }
      std::vector<unsigned char> got(bytes);
      Request r = c.irecv(0, got.data(), bytes, 1);
      r.wait();
      other.wait();
      EXPECT_EQ(small, 5);
      EXPECT_TRUE(got == big);
    }
  });
}

// Two large messages back to back; the receiver waits for the first and is then busy
// elsewhere (it only probes) when the second comes. Over tcp the second waits unread in the
// kernel's buffers, even when it came in the pass that finished the first, and lands in its
// receive's buffer with no early copy; over shared memory it is read into an early buffer.
TEST_P(TransportTest, EarlyLargePayloadWaitsUnreadForItsReceive) {
  run_world(2, GetParam(), [&](Communicator& c) {
    const size_t bytes = 1u << 20;
    std::vector<unsigned char> a = pattern(0, 1, 1, bytes), b = pattern(0, 1, 2, bytes);
    if (c.rank() == 0) {
      Request ra = c.isend(1, a.data(), bytes, 1);
      Request rb = c.isend(1, b.data(), bytes, 2);
      ra.wait();
      rb.wait();
    } else {
      std::vector<unsigned char> got(bytes);
      c.recv(0, got.data(), bytes, 1);
      EXPECT_TRUE(got == a);
      ProbeResult p;
      Deadline until = Deadline::after(30);
      while (!(p = c.probe(2)).found() && !until.expired()) {
      }
      ASSERT_TRUE(p.found()) << "probe never saw rank 0's second message";
      EXPECT_EQ(p.bytes, bytes);
      const uint64_t early = c.transport().bytes_buffered_early();
      c.recv(0, got.data(), bytes, 2);
      EXPECT_TRUE(got == b);
      if (GetParam() == TransportKind::kTcp) {
        EXPECT_EQ(early, 0u) << "a pass or the probe read the early payload";
        EXPECT_EQ(c.transport().bytes_buffered_early(), 0u) << "the receive copied it through a buffer";
      } else {
        EXPECT_EQ(early, bytes);
      }
    }
  });
}

// A receive whose message is behind a large one nobody has asked for yet reads past it: that
// payload goes to an early buffer, counted, and a later receive takes it from there intact.
TEST_P(TransportTest, AReceiveBehindAnEarlyPayloadReadsPastIt) {
  run_world(2, GetParam(), [&](Communicator& c) {
    const size_t bytes = 3u << 20;
    std::vector<unsigned char> big = pattern(0, 1, 1, bytes);
    if (c.rank() == 0) {
      int small = 11;
      Request a = c.isend(1, big.data(), bytes, 1);
      Request b = c.isend(1, &small, sizeof small, 2);
      b.wait();
      a.wait();
    } else {
      Deadline until = Deadline::after(30);
      while (!c.probe(1).found() && !until.expired()) {
      }
      int small = 0;
      c.recv(0, &small, sizeof small, 2);
      EXPECT_EQ(small, 11);
      // Over tcp the small message is read straight into its receive; shared memory reads what
      // has come at once, so the small one may have come before its receive too (seen under
      // ASan's pace: bytes + 4).
      const uint64_t early = c.transport().bytes_buffered_early();
      if (GetParam() == TransportKind::kTcp) {
        EXPECT_EQ(early, bytes);
      } else {
        EXPECT_GE(early, bytes);
        EXPECT_LE(early, bytes + sizeof small);
      }
      std::vector<unsigned char> got(bytes);
      c.recv(0, got.data(), bytes, 1);
      EXPECT_TRUE(got == big);
    }
  });
}

// Both ranks send more than the fabric holds and wait on their sends before either posts its
// receive: each wait reads what came early, so neither blocks the other.
TEST_P(TransportTest, BothSendLargeBeforeEitherReceives) {
  run_world(2, GetParam(), [&](Communicator& c) {
    const size_t bytes = 32u << 20;
    const int peer = 1 - c.rank();
    std::vector<unsigned char> out = pattern(c.rank(), peer, 4, bytes), in(bytes);
    c.send(peer, out.data(), bytes, 4);
    c.recv(peer, in.data(), bytes, 4);
    EXPECT_TRUE(in == pattern(peer, c.rank(), 4, bytes));
  });
}

TEST_P(TransportTest, SendToSelf) {
  run_world(1, GetParam(), [&](Communicator& c) {
    int a = 42, b = 0;
    Request r = c.isend(0, &a, sizeof a, 1);
    c.recv(0, &b, sizeof b, 1);
    r.wait();
    EXPECT_EQ(b, 42);
  });
}

TEST_P(TransportTest, WrongSizeNamesBothSizes) {
  run_world(2, GetParam(), [&](Communicator& c) {
    std::vector<char> buf(c.rank() == 0 ? 1000 : 2000);
    if (c.rank() == 0) {
      c.send(1, buf.data(), buf.size(), 5);
    } else {
      try {
        c.recv(0, buf.data(), buf.size(), 5);
        ADD_FAILURE() << "wrong-size receive succeeded";
      } catch (const InvalidArgument& e) {
        std::string w = e.what();
        EXPECT_NE(w.find("1000 bytes"), std::string::npos) << w;
        EXPECT_NE(w.find("2000"), std::string::npos) << w;
      }
    }
    // The link stays usable after a size error.
    int x = c.rank();
    int y = -1;
    Request r = c.irecv(1 - c.rank(), &y, sizeof y, 6);
    c.send(1 - c.rank(), &x, sizeof x, 6);
    r.wait();
    EXPECT_EQ(y, 1 - c.rank());
  });
}

TEST_P(TransportTest, ClosedPeerFailsPendingReceive) {
  run_world(2, GetParam(), [&](Communicator& c) {
    if (c.rank() == 1) {
      c.barrier();
      c.transport().close();
      return;
    }
    c.barrier();
    int x;
    try {
      c.recv(1, &x, sizeof x, 77);
      ADD_FAILURE() << "receive from a closed peer succeeded";
    } catch (const PeerFailure& e) {
      EXPECT_EQ(e.peer(), 1);
      EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    }
    // Future operations fail at once too.
    EXPECT_THROW(c.send(1, &x, sizeof x, 78), PeerFailure);
  });
}

TEST_P(TransportTest, ReceiveTimeoutNamesPeerAndCancels) {
  run_world(2, GetParam(), [&](Communicator& c) {
    int x = 0;
    if (c.rank() == 0) {
      try {
        c.transport().irecv(1, 11, &x, sizeof x).wait(0.2);
        ADD_FAILURE() << "no timeout";
      } catch (const Timeout& e) {
        std::string w = e.what();
        EXPECT_NE(w.find("rank 0 <- rank 1: recv (tag 11, 4 bytes): timed out"), std::string::npos) << w;
      }
    }
    c.barrier();  // the link still works: the receive was cancelled cleanly
    if (c.rank() == 1) {
      int v = 5;
      c.send(0, &v, sizeof v, 12);
    } else {
      c.recv(1, &x, sizeof x, 12);
      EXPECT_EQ(x, 5);
    }
  });
}

// More ranks than cores: every rank sends a ring of messages; nothing collapses or hangs.
TEST_P(TransportTest, OversubscribedRingOf8) {
  run_world(8, GetParam(), [&](Communicator& c) {
    int n = c.size(), r = c.rank();
    std::vector<int> out(5000), in(5000);
    for (int round = 0; round < 30; ++round) {
      for (int i = 0; i < 5000; ++i) out[i] = r * 100000 + round * 10 + i;
      Request rr = c.irecv((r + n - 1) % n, in.data(), in.size() * sizeof(int), round);
      Request sr = c.isend((r + 1) % n, out.data(), out.size() * sizeof(int), round);
      rr.wait();
      sr.wait();
      int from = (r + n - 1) % n;
      ASSERT_EQ(in[0], from * 100000 + round * 10);
      ASSERT_EQ(in[4999], from * 100000 + round * 10 + 4999);
    }
    c.barrier();
  });
}

TEST_P(TransportTest, SplitMakesWorkingSubgroups) {
  run_world(6, GetParam(), [&](Communicator& c) {
    auto sub = c.split(c.rank() % 2, -c.rank());  // reverse order by key
    ASSERT_TRUE(sub);
    EXPECT_EQ(sub->size(), 3);
    // key = -rank: the highest world rank of each color gets rank 0.
    int expect_rank = (c.rank() % 2 == 0) ? (4 - c.rank()) / 2 : (5 - c.rank()) / 2;
    EXPECT_EQ(sub->rank(), expect_rank);
    EXPECT_EQ(sub->world_rank(sub->rank()), c.rank());
    int token = c.rank(), got = -1;
    int next = (sub->rank() + 1) % 3, prev = (sub->rank() + 2) % 3;
    Request r = sub->irecv(prev, &got, sizeof got);
    sub->send(next, &token, sizeof token);
    r.wait();
    EXPECT_EQ(got % 2, c.rank() % 2);  // same color
    EXPECT_EQ(sub->world_rank(prev), got);
    auto none = c.split(c.rank() == 0 ? -1 : 0, 0);
    EXPECT_EQ(none == nullptr, c.rank() == 0);
    if (none) {
      EXPECT_EQ(none->size(), 5);
      none->barrier();
    }
  });
}

// Receive from any source: three senders and the receiver itself each send `per` messages
// with one tag; the receiver takes them all with any-source receives (some posted before the
// messages came, some after, some blocking). Each message is received exactly once, the
// reported source is the sender named in the payload, and each sender's messages keep order.
TEST_P(TransportTest, AnySourceSeveralSendersEachOnceWithSource) {
  run_world(4, GetParam(), [&](Communicator& c) {
    const int per = 40;
    const uint32_t tag = 21;
    if (c.rank() != 0) {
      std::vector<std::array<int, 2>> msgs(per);
      std::vector<Request> reqs;
      for (int i = 0; i < per; ++i) {
        msgs[i] = {c.rank(), i};
        reqs.push_back(c.isend(0, msgs[i].data(), sizeof msgs[i], tag));
      }
      Transport::wait_all(reqs);
      c.barrier();
      return;
    }
    std::array<int, 2> own_msgs[3];
    std::vector<Request> own;
    for (int i = 0; i < 3; ++i) {
      own_msgs[i] = {0, i};
      own.push_back(c.isend(0, own_msgs[i].data(), sizeof own_msgs[i], tag));
    }
    const int total = 3 * per + 3;
    std::vector<std::array<int, 2>> got(total, {-1, -1});
    std::vector<int> source(total, -1);
    // Half posted up front (most arrive after posting), the rest one blocking call each (most
    // already buffered by then).
    std::vector<Request> posted;
    for (int k = 0; k < total / 2; ++k) posted.push_back(c.irecv(kAnySource, got[k].data(), sizeof got[k], tag));
    for (int k = 0; k < total / 2; ++k) {
      posted[k].wait();
      source[k] = posted[k].source();
    }
    for (int k = total / 2; k < total; ++k) source[k] = c.recv(kAnySource, got[k].data(), sizeof got[k], tag);
    Transport::wait_all(own);
    std::vector<int> next(4, 0);
    for (int k = 0; k < total; ++k) {
      ASSERT_EQ(source[k], got[k][0]) << "message " << k;
      ASSERT_EQ(got[k][1], next[source[k]]) << "from rank " << source[k] << ": out of order or duplicated";
      ++next[source[k]];
    }
    EXPECT_EQ(next, (std::vector<int>{3, per, per, per}));
    ProbeResult none = c.probe(tag);
    EXPECT_FALSE(none.found());
    c.barrier();
  });
}

// probe names the rank whose message waits; an any-source receive of another tag ignores it;
// a specific and an any-source receive of one tag get messages in the order they were posted.
TEST_P(TransportTest, AnySourceProbeAndPostingOrder) {
  run_world(3, GetParam(), [&](Communicator& c) {
    if (c.rank() == 2) {
      int v = 77;
      c.send(0, &v, sizeof v, 5);
      int a = 1, b = 2, d = 3, e = 4;
      c.send(0, &a, sizeof a, 6);  // the receiver posted any-source, then specific
      c.send(0, &b, sizeof b, 6);
      c.send(0, &d, sizeof d, 7);  // the receiver posted specific, then any-source
      c.send(0, &e, sizeof e, 7);
      c.barrier();  // stays until rank 0 is done: its leaving would fail rank 0's any-source receive
    } else if (c.rank() == 0) {
      ProbeResult p;
      Deadline until = Deadline::after(20);
      while (!(p = c.probe(5)).found() && !until.expired()) {
      }
      ASSERT_TRUE(p.found()) << "probe never saw rank 2's message";
      EXPECT_EQ(p.source, 2);
      EXPECT_EQ(p.bytes, sizeof(int));
      EXPECT_FALSE(c.probe(99).found());
      int other = -1;
      Request wrong_tag = c.irecv(kAnySource, &other, sizeof other, 4);
      int v = 0;
      EXPECT_EQ(c.recv(kAnySource, &v, sizeof v, 5), 2);
      EXPECT_EQ(v, 77);
      EXPECT_FALSE(wrong_tag.test());
      int x = 0, y = 0;
      Request any_first = c.irecv(kAnySource, &x, sizeof x, 6);
      Request specific = c.irecv(2, &y, sizeof y, 6);
      any_first.wait();
      specific.wait();
      EXPECT_EQ(x, 1);
      EXPECT_EQ(y, 2);
      EXPECT_EQ(any_first.source(), 2);
      EXPECT_EQ(specific.source(), 2);
      Request specific_first = c.irecv(2, &x, sizeof x, 7);
      Request any_second = c.irecv(kAnySource, &y, sizeof y, 7);
      specific_first.wait();
      any_second.wait();
      EXPECT_EQ(x, 3);
      EXPECT_EQ(y, 4);
      int z = 9;
      c.send(1, &z, sizeof z, 4);  // rank 1 answers on tag 4: the pending any-source receive
      wrong_tag.wait();
      EXPECT_EQ(other, 10);
      EXPECT_EQ(wrong_tag.source(), 1);
      c.barrier();
    } else {
      int z = 0;
      c.recv(0, &z, sizeof z, 4);
      z += 1;
      c.send(0, &z, sizeof z, 4);
      c.barrier();
    }
  });
}

// An any-source receive nobody answers times out naming the tag and is cancelled: a message
// of that tag sent later goes to the next receive, not to the cancelled one.
TEST_P(TransportTest, AnySourceTimeoutCancels) {
  run_world(3, GetParam(), [&](Communicator& c) {
    int x = 0;
    if (c.rank() == 0) {
      try {
        c.transport().irecv(kAnySource, 11, &x, sizeof x).wait(0.2);
        ADD_FAILURE() << "no timeout";
      } catch (const Timeout& e) {
        std::string w = e.what();
        EXPECT_NE(w.find("rank 0 <- any rank: recv (tag 11, 4 bytes): timed out"), std::string::npos) << w;
        EXPECT_NE(w.find("no rank sent a message with this tag"), std::string::npos) << w;
      }
    }
    c.barrier();
    if (c.rank() == 1) {
      int v = 5;
      c.send(0, &v, sizeof v, 11);
    } else if (c.rank() == 0) {
      EXPECT_EQ(c.recv(kAnySource, &x, sizeof x, 11), 1);
      EXPECT_EQ(x, 5);
    }
  });
}

// A peer that dies while an any-source receive waits fails it with PeerFailure naming that
// peer (its message might have been the one awaited); so does one that had died before.
// (Rank 2's fabric is cut at its first message, as if the process died: it says no goodbye.)
TEST_P(TransportTest, AnySourceFailsWhenAPeerDies) {
  testing::WorldOptions o;
  o.kind = GetParam();
  o.fault_rank = 2;
  o.fault.kind = testing::Fault::kKill;
  run_world(3, o, [&](Communicator& c) {
    int x = 0;
    if (c.rank() == 2) {
      EXPECT_THROW(c.send(1, &x, sizeof x, 40), PeerFailure);  // dies here
      return;
    }
    if (c.rank() == 0) {
      for (int attempt = 0; attempt < 2; ++attempt) {  // pending when it dies, then posted after
        try {
          c.recv(kAnySource, &x, sizeof x, 31);
          ADD_FAILURE() << "any-source receive succeeded";
        } catch (const PeerFailure& e) {
          EXPECT_EQ(e.peer(), 2);
          std::string w = e.what();
          EXPECT_NE(w.find("rank 0 <- any rank"), std::string::npos) << w;
          EXPECT_NE(w.find("rank 2 failed"), std::string::npos) << w;
        }
      }
      c.send(1, &x, sizeof x, 32);  // rank 1 stays until rank 0 is done
    } else {
      c.recv(0, &x, sizeof x, 32);
    }
  });
}

// A peer that closes its transport on purpose says so: it will send nothing more, so an
// any-source receive goes on waiting for the others (a receive naming it still fails).
TEST_P(TransportTest, AnySourceOutlivesAPeerThatLeftCleanly) {
  run_world(3, GetParam(), [&](Communicator& c) {
    c.barrier();
    if (c.rank() == 2) {
      c.transport().close();
      return;
    }
    int x = 0;
    if (c.rank() == 0) {
      Request any = c.irecv(kAnySource, &x, sizeof x, 31);
      int y = 0;
      EXPECT_THROW(c.recv(2, &y, sizeof y, 30), PeerFailure);  // rank 0 has seen rank 2 leave
      c.send(1, &y, sizeof y, 33);                              // only now rank 1 sends
      any.wait();
      EXPECT_EQ(any.source(), 1);
      EXPECT_EQ(x, 7);
    } else {
      int go = 0;
      c.recv(0, &go, sizeof go, 33);
      int v = 7;
      c.send(0, &v, sizeof v, 31);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Kinds, TransportTest, ::testing::Values(TransportKind::kShm, TransportKind::kTcp),
                         [](const auto& info) { return std::string(transport_kind_name(info.param)); });

TEST(Transport, SmallRingStillStreamsLargeMessages) {
  testing::WorldOptions o;
  o.kind = TransportKind::kShm;
  o.shm_ring_bytes = 4096;
  run_world(3, o, [&](Communicator& c) {
    std::vector<int> out(100003, c.rank()), in(100003, -1);
    int n = c.size();
    Request r = c.irecv((c.rank() + n - 1) % n, in.data(), in.size() * 4);
    c.send((c.rank() + 1) % n, out.data(), out.size() * 4);
    r.wait();
    EXPECT_EQ(in[100002], (c.rank() + n - 1) % n);
  });
}

}  // namespace
}  // namespace dtrain
