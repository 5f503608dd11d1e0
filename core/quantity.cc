// Parsing follows k8s.io/apimachinery/pkg/api/resource: a signed decimal
// number followed by a binary suffix (Ki..Ei), a decimal SI suffix (n, u, m,
// k, M, G, T, P, E) or a decimal exponent (e3 / E3).
#include "core/quantity.h"

#include <cctype>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gangsched {
namespace {

using i128 = __int128;
constexpr i128 kInt64Max = std::numeric_limits<int64_t>::max();
// 10^30: keeps every intermediate product far inside 128 bits.
constexpr i128 kMantissaMax = i128{1000000000000000} * 1000000000000000;
constexpr i128 kNumeratorMax = kMantissaMax * 1000000;

bool IsByteName(absl::string_view name) {
  return name == "memory" || name == "ephemeral-storage" ||
         name == "nvidia.com/gpu-memory" ||
         absl::StartsWith(name, "hugepages-") ||
         absl::EndsWith(name, "/memory");
}

// Multiplier of the suffix as value = 10^pow10 * 2^pow2.
struct Suffix {
  int pow10 = 0;
  int pow2 = 0;
};

bool ParseSuffix(absl::string_view s, Suffix* out) {
  if (s.empty()) return true;
  static constexpr struct {
    absl::string_view name;
    Suffix value;
  } kSuffixes[] = {
      {"Ki", {0, 10}}, {"Mi", {0, 20}}, {"Gi", {0, 30}}, {"Ti", {0, 40}},
      {"Pi", {0, 50}}, {"Ei", {0, 60}}, {"n", {-9, 0}},  {"u", {-6, 0}},
      {"m", {-3, 0}},  {"k", {3, 0}},   {"M", {6, 0}},   {"G", {9, 0}},
      {"T", {12, 0}},  {"P", {15, 0}},  {"E", {18, 0}},
  };
  for (const auto& suffix : kSuffixes) {
    if (s == suffix.name) {
      *out = suffix.value;
      return true;
    }
  }
  if (s[0] == 'e' || s[0] == 'E') {
    absl::string_view digits = s.substr(1);
    bool negative = false;
    if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) {
      negative = digits[0] == '-';
      digits.remove_prefix(1);
    }
    if (digits.empty() || digits.size() > 3) return false;
    int exp = 0;
    for (char c : digits) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
      exp = exp * 10 + (c - '0');
    }
    out->pow10 = negative ? -exp : exp;
    return true;
  }
  return false;
}

}  // namespace

QuantityScale ScaleFor(absl::string_view resource_name) {
  return IsByteName(resource_name) ? QuantityScale::kBytes
                                   : QuantityScale::kMilli;
}

absl::StatusOr<int64_t> ParseQuantity(absl::string_view text,
                                      QuantityScale scale) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not a valid quantity: ", why));
  };
  absl::string_view s = text;
  if (s.empty()) return bad("empty");
  if (s[0] == '-') return bad("must not be negative");
  if (s[0] == '+') s.remove_prefix(1);

  // Mantissa as an integer with `frac_digits` implied decimals. Digits past
  // 18 decimals are dropped but remembered, so the result still rounds up.
  i128 mantissa = 0;
  int frac_digits = 0;
  bool any_digit = false;
  bool in_fraction = false;
  bool dropped_nonzero = false;
  size_t i = 0;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c == '.') {
      if (in_fraction) return bad("two decimal points");
      in_fraction = true;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(c))) break;
    any_digit = true;
    if (in_fraction && frac_digits >= 18) {
      dropped_nonzero |= c != '0';
      continue;
    }
    mantissa = mantissa * 10 + (c - '0');
    if (mantissa > kMantissaMax) return bad("too large");
    if (in_fraction) ++frac_digits;
  }
  if (!any_digit) return bad("no digits");
  Suffix suffix;
  if (!ParseSuffix(s.substr(i), &suffix)) return bad("unknown suffix");

  // value = mantissa * 10^pow10 * 2^pow2, rounded up to a whole unit.
  int pow10 =
      suffix.pow10 - frac_digits + (scale == QuantityScale::kMilli ? 3 : 0);
  i128 numerator = mantissa;
  if (numerator > (kNumeratorMax >> suffix.pow2)) return bad("too large");
  numerator <<= suffix.pow2;
  for (; pow10 > 0; --pow10) {
    numerator *= 10;
    if (numerator > kNumeratorMax) return bad("too large");
  }
  i128 denominator = 1;
  for (; pow10 < 0; ++pow10) {
    denominator *= 10;
    if (denominator > kMantissaMax) {
      // Anything this small rounds up to one unit unless it is zero.
      return numerator == 0 && !dropped_nonzero ? 0 : 1;
    }
  }
  // Whole numbers ("8", "64Gi", "500m" of cpu) skip the 128-bit division.
  i128 value = numerator;
  bool round_up = dropped_nonzero;
  if (denominator != 1) {
    value = numerator / denominator;
    round_up |= numerator % denominator != 0;
  }
  if (round_up) ++value;
  if (value > kInt64Max) return bad("too large");
  return static_cast<int64_t>(value);
}

namespace {

// Decimal SI form: the largest power of 1000 that divides `n` exactly
// ("840G", "1500", "64k"), as Kubernetes writes a DecimalSI quantity.
struct Form {
  int64_t mantissa = 0;
  absl::string_view suffix;
};

Form DecimalForm(int64_t n) {
  static constexpr absl::string_view kSuffixes[] = {"",  "k", "M", "G",
                                                    "T", "P", "E"};
  size_t k = 0;
  while (n != 0 && n % 1000 == 0 && k + 1 < std::size(kSuffixes)) {
    n /= 1000;
    ++k;
  }
  return {n, kSuffixes[k]};
}

int Digits(int64_t n) {
  int digits = 1;
  for (; n >= 10; n /= 10) ++digits;
  return digits;
}

}  // namespace

std::string FormatQuantity(int64_t amount, QuantityScale scale) {
  if (scale == QuantityScale::kMilli) {
    if (amount % 1000 != 0) return absl::StrCat(amount, "m");
    const Form decimal = DecimalForm(amount / 1000);
    return absl::StrCat(decimal.mantissa, decimal.suffix);
  }
  // Kubernetes keeps the form a quantity was written in (BinarySI "16Gi",
  // DecimalSI "840G"); only the amount is kept here, so the form with the
  // fewer digits is chosen, the binary one on a tie: "840G", not
  // "820312500Ki"; "16Gi"; "1000Ki", not "1024k" (docs/SCHEDULING.md,
  // "Resources").
  const Form decimal = DecimalForm(amount);
  if (amount >= 1024 && amount % 1024 == 0) {
    static constexpr struct {
      absl::string_view suffix;
      int shift;
    } kBinary[] = {{"Ei", 60}, {"Pi", 50}, {"Ti", 40},
                   {"Gi", 30}, {"Mi", 20}, {"Ki", 10}};
    for (const auto& b : kBinary) {
      const int64_t unit = int64_t{1} << b.shift;
      if (amount % unit != 0) continue;
      if (Digits(amount / unit) <= Digits(decimal.mantissa)) {
        return absl::StrCat(amount / unit, b.suffix);
      }
      break;
    }
  }
  return absl::StrCat(decimal.mantissa, decimal.suffix);
}

}  // namespace gangsched
