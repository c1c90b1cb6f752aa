// optpipe's version ("0.1.0", the CMake project's), and the "generator"
// every file optpipe writes carries ("optpipe 0.1.0").
#pragma once

namespace optpipe {

const char* Version();
const char* Generator();

}  // namespace optpipe
