"""Allure reporting: results metadata, attachments, and the offline HTML report."""
