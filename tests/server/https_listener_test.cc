#include "server/https_listener.h"

#include "gtest/gtest.h"

namespace gangsched::server {
namespace {

TEST(ParseRequestHeadTest, ReadsTheRequestLineAndTheFirstAuthorization) {
  HttpRequest r;
  ASSERT_TRUE(
      ParseRequestHead("GET /explain?id=a%20b HTTP/1.1\r\nHost: x\r\n"
                       "authorization:  Bearer t1 \r\nAuthorization: Bearer t2",
                       &r));
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.path, "/explain");
  EXPECT_EQ(r.query, "id=a%20b");
  EXPECT_EQ(r.authorization, "Bearer t1");
  ASSERT_TRUE(ParseRequestHead("HEAD / HTTP/1.0", &r));
  // The absolute form (RFC 9112, 3.2.2): the path after the authority.
  ASSERT_TRUE(
      ParseRequestHead("GET HTTPS://h:9090/api/state?x=1 HTTP/1.1", &r));
  EXPECT_EQ(r.path, "/api/state");
  EXPECT_EQ(r.query, "x=1");
  ASSERT_TRUE(ParseRequestHead("GET http://h HTTP/1.1", &r));
  EXPECT_EQ(r.path, "/");
}

// What RFC 9112 says is not a request is refused (the listener answers
// 400), so that nothing of it reaches a handler or a log line: a lone LF or
// CR, control or non-ASCII bytes in the target, another protocol, a header
// line without a name.
TEST(ParseRequestHeadTest, RefusesWhatIsNotAnHttp1Request) {
  for (const char* head : {
           "GET /a\nb HTTP/1.1",
           "GET /a\rb HTTP/1.1",
           "GET /\x01 HTTP/1.1",
           "GET /\xc3\xa9 HTTP/1.1",
           "GET / HTTP/2.0",
           "GET / HTTP/1.10",
           "G(T / HTTP/1.1",
           "GET  / HTTP/1.1",
           "GET x HTTP/1.1",
           "GET / HTTP/1.1\r\nno colon",
           "GET / HTTP/1.1\r\n: empty name",
           "GET / HTTP/1.1\r\nX Y: space in the name",
           "GET / HTTP/1.1\r\nAuthorization: Bearer a\nInjected: 1",
           "GET / HTTP/1.1\r\nHost: x\r\n\r\nafter the blank line",
       }) {
    HttpRequest r;
    EXPECT_FALSE(ParseRequestHead(head, &r)) << head;
  }
}

TEST(FormatResponseTest, LengthAndNoSniffingWithoutABodyForHead) {
  HttpResponse response{.code = 404, .body = "not found\n"};
  std::string get = FormatResponse(response, false);
  EXPECT_NE(get.find("\r\nContent-Length: 10\r\n"), std::string::npos) << get;
  EXPECT_NE(get.find("\r\nX-Content-Type-Options: nosniff\r\n"),
            std::string::npos);
  EXPECT_EQ(get.substr(get.size() - 14), "\r\n\r\nnot found\n");
  std::string head = FormatResponse(response, true);
  EXPECT_NE(head.find("\r\nContent-Length: 10\r\n"), std::string::npos);
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n");
}

}  // namespace
}  // namespace gangsched::server
