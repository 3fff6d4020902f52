#include "protocol/target_xml.h"

#include <algorithm>
#include <string_view>

#include "protocol/xml.h"

namespace protocol {
namespace {

constexpr std::string_view kHeader =
    "<?xml version=\"1.0\"?>\n<!DOCTYPE target SYSTEM \"gdb-target.dtd\">\n<target>\n"
    "<architecture>i386:x86-64</architecture>\n<osabi>GNU/Linux</osabi>\n";

// A type that must be defined inside the feature that uses it: its text, and the types
// its text refers to (defined first). GDB's own types (int64, uint128, i387_ext, ...) need
// no definition.
struct TypeDef {
  std::string_view id;
  std::string_view depends[6];
  std::string_view text;
};

constexpr TypeDef kTypes[] = {
    {"v4f", {}, "<vector id=\"v4f\" type=\"ieee_single\" count=\"4\"/>\n"},
    {"v2d", {}, "<vector id=\"v2d\" type=\"ieee_double\" count=\"2\"/>\n"},
    {"v16i8", {}, "<vector id=\"v16i8\" type=\"int8\" count=\"16\"/>\n"},
    {"v8i16", {}, "<vector id=\"v8i16\" type=\"int16\" count=\"8\"/>\n"},
    {"v4i32", {}, "<vector id=\"v4i32\" type=\"int32\" count=\"4\"/>\n"},
    {"v2i64", {}, "<vector id=\"v2i64\" type=\"int64\" count=\"2\"/>\n"},
    {"v2ui128", {}, "<vector id=\"v2ui128\" type=\"uint128\" count=\"2\"/>\n"},
    {"vec128",
     {"v4f", "v2d", "v16i8", "v8i16", "v4i32", "v2i64"},
     "<union id=\"vec128\">\n"
     "  <field name=\"v4_float\" type=\"v4f\"/>\n"
     "  <field name=\"v2_double\" type=\"v2d\"/>\n"
     "  <field name=\"v16_int8\" type=\"v16i8\"/>\n"
     "  <field name=\"v8_int16\" type=\"v8i16\"/>\n"
     "  <field name=\"v4_int32\" type=\"v4i32\"/>\n"
     "  <field name=\"v2_int64\" type=\"v2i64\"/>\n"
     "  <field name=\"uint128\" type=\"uint128\"/>\n"
     "</union>\n"},
    {"i386_eflags",
     {},
     "<flags id=\"i386_eflags\" size=\"4\">\n"
     "  <field name=\"CF\" start=\"0\" end=\"0\"/>\n"
     "  <field name=\"PF\" start=\"2\" end=\"2\"/>\n"
     "  <field name=\"AF\" start=\"4\" end=\"4\"/>\n"
     "  <field name=\"ZF\" start=\"6\" end=\"6\"/>\n"
     "  <field name=\"SF\" start=\"7\" end=\"7\"/>\n"
     "  <field name=\"TF\" start=\"8\" end=\"8\"/>\n"
     "  <field name=\"IF\" start=\"9\" end=\"9\"/>\n"
     "  <field name=\"DF\" start=\"10\" end=\"10\"/>\n"
     "  <field name=\"OF\" start=\"11\" end=\"11\"/>\n"
     "  <field name=\"NT\" start=\"14\" end=\"14\"/>\n"
     "  <field name=\"RF\" start=\"16\" end=\"16\"/>\n"
     "  <field name=\"VM\" start=\"17\" end=\"17\"/>\n"
     "  <field name=\"AC\" start=\"18\" end=\"18\"/>\n"
     "  <field name=\"VIF\" start=\"19\" end=\"19\"/>\n"
     "  <field name=\"VIP\" start=\"20\" end=\"20\"/>\n"
     "  <field name=\"ID\" start=\"21\" end=\"21\"/>\n"
     "</flags>\n"},
    {"i386_mxcsr",
     {},
     "<flags id=\"i386_mxcsr\" size=\"4\">\n"
     "  <field name=\"IE\" start=\"0\" end=\"0\"/>\n"
     "  <field name=\"DE\" start=\"1\" end=\"1\"/>\n"
     "  <field name=\"ZE\" start=\"2\" end=\"2\"/>\n"
     "  <field name=\"OE\" start=\"3\" end=\"3\"/>\n"
     "  <field name=\"UE\" start=\"4\" end=\"4\"/>\n"
     "  <field name=\"PE\" start=\"5\" end=\"5\"/>\n"
     "  <field name=\"DAZ\" start=\"6\" end=\"6\"/>\n"
     "  <field name=\"IM\" start=\"7\" end=\"7\"/>\n"
     "  <field name=\"DM\" start=\"8\" end=\"8\"/>\n"
     "  <field name=\"ZM\" start=\"9\" end=\"9\"/>\n"
     "  <field name=\"OM\" start=\"10\" end=\"10\"/>\n"
     "  <field name=\"UM\" start=\"11\" end=\"11\"/>\n"
     "  <field name=\"PM\" start=\"12\" end=\"12\"/>\n"
     "  <field name=\"FZ\" start=\"15\" end=\"15\"/>\n"
     "</flags>\n"},
};

const TypeDef* find_type(std::string_view id) {
  for (const TypeDef& t : kTypes)
    if (t.id == id) return &t;
  return nullptr;
}

// Appends the definition of `id` (after its dependencies) unless already defined here.
void define_type(std::string& out, std::vector<std::string_view>& defined, std::string_view id) {
  const TypeDef* t = find_type(id);
  if (!t || std::find(defined.begin(), defined.end(), id) != defined.end()) return;
  for (std::string_view dep : t->depends)
    if (!dep.empty()) define_type(out, defined, dep);
  defined.push_back(id);
  out += t->text;
}

}  // namespace

std::string target_xml(const std::vector<RegisterSpec>& registers) {
  std::string out(kHeader);
  std::vector<std::string> features;
  for (const RegisterSpec& r : registers)
    if (std::find(features.begin(), features.end(), r.feature) == features.end()) features.push_back(r.feature);

  for (const std::string& feature : features) {
    out += "<feature name=\"" + xml_escape(feature) + "\">\n";
    std::vector<std::string_view> defined;
    for (const RegisterSpec& r : registers)
      if (r.feature == feature) define_type(out, defined, r.type);
    for (const RegisterSpec& r : registers) {
      if (r.feature != feature) continue;
      out += "<reg name=\"" + xml_escape(r.name) + "\" bitsize=\"" + std::to_string(r.bitsize) + "\" type=\"" +
             xml_escape(r.type) + "\" regnum=\"" + std::to_string(r.regnum) + "\"";
      if (!r.group.empty()) out += " group=\"" + xml_escape(r.group) + "\"";
      out += "/>\n";
    }
    out += "</feature>\n";
  }
  out += "</target>\n";
  return out;
}

std::string empty_target_xml() { return std::string(kHeader) + "</target>\n"; }

}  // namespace protocol
