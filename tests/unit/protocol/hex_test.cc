#include <catch2/catch.hpp>

#include "protocol/hex.h"

using namespace protocol;

TEST_CASE("hex encode and decode", "[hex]") {
  const std::vector<uint8_t> bytes{0x00, 0x7f, 0xab, 0xff};
  CHECK(to_hex(bytes) == "007fabff");
  CHECK(to_hex(std::string_view("OK")) == "4f4b");
  CHECK(from_hex("007FabfF") == bytes);
  CHECK(from_hex("").value().empty());
  CHECK_FALSE(from_hex("abc"));
  CHECK_FALSE(from_hex("zz"));
  CHECK(from_hex_string("68656c70") == "help");
  CHECK_FALSE(from_hex_string("6g"));
}

TEST_CASE("parse_hex_u64 is strict", "[hex]") {
  CHECK(parse_hex_u64("0") == 0u);
  CHECK(parse_hex_u64("ffffffffffffffff") == UINT64_MAX);
  CHECK(parse_hex_u64("DeadBeef") == 0xdeadbeefu);
  CHECK_FALSE(parse_hex_u64(""));
  CHECK_FALSE(parse_hex_u64("1ffffffffffffffff"));
  CHECK_FALSE(parse_hex_u64("12 "));
  CHECK_FALSE(parse_hex_u64("-1"));
  CHECK_FALSE(parse_hex_u64("0x10"));
}

TEST_CASE("hex_u64 is lowercase without leading zeros", "[hex]") {
  CHECK(hex_u64(0) == "0");
  CHECK(hex_u64(0x1182) == "1182");
  CHECK(hex_u64(0xABCDEF) == "abcdef");
  CHECK(hex_u64(UINT64_MAX) == "ffffffffffffffff");
}

TEST_CASE("binary escaping", "[hex]") {
  // The bytes GDB's protocol says must be escaped in binary data: # $ } *, plus NUL and A.
  const std::string raw{'#', '$', '}', '*', '\0', 'A'};
  const std::string escaped{'}', '\x03', '}', '\x04', '}', ']', '}', '\x0a', '\0', 'A'};
  CHECK(escape_binary(std::string_view(raw)) == escaped);
  std::vector<uint8_t> rawbytes(raw.begin(), raw.end());
  CHECK(escape_binary(rawbytes) == escaped);
  CHECK(unescape_binary(escaped) == raw);
  CHECK(unescape_binary("ab}") == "ab");  // dangling escape dropped
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  CHECK(unescape_binary(escape_binary(std::string_view(all))) == all);
}

TEST_CASE("RLE compress follows gdbserver's rules", "[hex][rle]") {
  CHECK(rle_compress("abc") == "abc");
  CHECK(rle_compress("000") == "000");
  CHECK(rle_compress("0000") == "0* ");          // 3 extra -> ' '
  CHECK(rle_compress("00000") == "0*!");         // 4 extra
  CHECK(rle_compress("000000") == "0*\"");       // 5 extra
  // 6 and 7 extra would give '#' and '$': shortened to 5 extra, rest literal.
  CHECK(rle_compress(std::string(7, '0')) == "0*\"0");
  CHECK(rle_compress(std::string(8, '0')) == "0*\"00");
  CHECK(rle_compress(std::string(9, '0')) == "0*%");  // 8 extra
  // Longest run: 96 extra copies ('}'), then continues.
  CHECK(rle_compress(std::string(97, '0')) == "0*}");
  CHECK(rle_compress(std::string(98, '0')) == "0*}0");
  CHECK(rle_compress(std::string(101, '0')) == "0*}0* ");
  // Escape pairs are never split; '*' '#' '$' never repeated.
  CHECK(rle_compress("}]]]]]") == "}]]* ");
  CHECK(rle_compress("****") == "****");
  // Observed gdbserver reply shape.
  CHECK(rle_compress("T0506:0000000000000000;") == "T0506:0*,;");
}

TEST_CASE("RLE expand and round trip", "[hex][rle]") {
  CHECK(rle_expand("0* ") == "0000");
  CHECK(rle_expand("0*}") == std::string(97, '0'));
  CHECK(rle_expand("a*\x1d") == "a");  // zero extra copies
  CHECK_FALSE(rle_expand("*a"));
  CHECK_FALSE(rle_expand("a*"));
  CHECK_FALSE(rle_expand("a*\x01"));
  for (size_t n = 1; n < 300; ++n) {
    std::string s = "x" + std::string(n, 'f') + "y" + std::string(n % 13, '0');
    std::string c = rle_compress(s);
    CHECK(c.find('#') == std::string::npos);
    CHECK(c.find('$') == std::string::npos);
    CHECK(rle_expand(c) == s);
  }
}

TEST_CASE("overloads accept std::string, literals and byte vectors", "[hex]") {
  const std::string s = "a#";
  const std::vector<uint8_t> v{'a', '#'};
  CHECK(to_hex(s) == "6123");
  CHECK(to_hex("a#") == "6123");
  CHECK(to_hex(v) == "6123");
  CHECK(escape_binary(s) == "a}\x03");
  CHECK(escape_binary(v) == "a}\x03");
}
