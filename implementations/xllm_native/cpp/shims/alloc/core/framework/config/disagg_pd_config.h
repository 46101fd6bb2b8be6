// lwsplit-harness shim for core/framework/config/disagg_pd_config.h: included by util/utils.h,
// whose inline helpers name nothing from it.
#pragma once
