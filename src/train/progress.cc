#include "train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "base/clock.h"

namespace dtrain {
namespace {
std::string hms(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  const auto t = static_cast<int64_t>(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(t / 3600),
                               static_cast<long long>(t / 60 % 60), static_cast<long long>(t % 60));
  else std::snprintf(buf, sizeof buf, "%02lld:%02lld", static_cast<long long>(t / 60), static_cast<long long>(t % 60));
  return buf;
}
}  // namespace

bool is_tty(std::FILE* f) { return f != nullptr && ::isatty(::fileno(f)) == 1; }

Progress::Progress(std::FILE* out, bool tty, int64_t epochs, int64_t per_epoch, const char* unit, bool accuracy,
                   const char* word)
    : out_(out), tty_(tty), epochs_(epochs), per_epoch_(std::max<int64_t>(1, per_epoch)), unit_(unit),
      accuracy_(accuracy), word_(word), run_start_(now_seconds()) {}

void Progress::begin_epoch(int64_t epoch) {
  epoch_ = epoch;
  epoch_start_ = last_draw_ = now_seconds();
}

void Progress::update(int64_t done, double loss) {
  if (out_ == nullptr || !tty_) return;
  const double now = now_seconds();
  if (now - last_draw_ < 0.1 && done < per_epoch_) return;
  last_draw_ = now;
  const double elapsed = now - epoch_start_;
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
  const double frac = std::min(1.0, static_cast<double>(done) / static_cast<double>(per_epoch_));
  const double left_examples = (1.0 - frac) * static_cast<double>(per_epoch_) +
                               static_cast<double>(epochs_ - epoch_) * static_cast<double>(per_epoch_);
  const double eta = rate > 0 ? left_examples / rate : NAN;
  char bar[21];
  const int filled = static_cast<int>(frac * 20);
  for (int i = 0; i < 20; ++i) bar[i] = i < filled ? '#' : '.';
  bar[20] = 0;
  char acc[48] = "";
  if (last_test_acc_ >= 0 && accuracy_) std::snprintf(acc, sizeof acc, "  test_acc %.4f", last_test_acc_);
  std::fprintf(out_, "\r\033[K%s %lld/%lld [%s] %lld/%lld loss %.4f%s  %.1f %s/s  ETA %s", word_,
               static_cast<long long>(epoch_), static_cast<long long>(epochs_), bar, static_cast<long long>(done),
               static_cast<long long>(per_epoch_), loss, acc, rate, unit_, hms(eta).c_str());
  std::fflush(out_);
}

void Progress::end_epoch(const EpochRow& r, bool has_test) {
  if (out_ == nullptr) return;
  ++epochs_done_in_run_;
  const double per = (now_seconds() - run_start_) / static_cast<double>(epochs_done_in_run_);
  if (tty_) std::fprintf(out_, "\r\033[K");
  std::fprintf(out_, "%s %lld/%lld  loss %.4f", word_, static_cast<long long>(r.epoch), static_cast<long long>(epochs_),
               r.train_loss);
  if (accuracy_) std::fprintf(out_, "  acc %.4f", r.train_accuracy);
  if (has_test) std::fprintf(out_, accuracy_ ? "  test_loss %.4f" : "  val_loss %.4f", r.test_loss);
  if (has_test && accuracy_) std::fprintf(out_, "  test_acc %.4f", r.test_accuracy);
  last_test_acc_ = r.test_accuracy;
  for (const auto& [name, value] : r.extra) std::fprintf(out_, "  %s %.4g", name.c_str(), value);
  std::fprintf(out_, "  %.2fs  %.0f ex/s  ETA %s\n", r.seconds, r.examples_per_second,
               hms(per * static_cast<double>(epochs_ - r.epoch)).c_str());
  std::fflush(out_);
}

void Progress::message(const std::string& line) {
  if (out_ == nullptr) return;
  if (tty_) std::fprintf(out_, "\r\033[K");
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

}  // namespace dtrain
